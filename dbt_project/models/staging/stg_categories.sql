select category_id, category_name, department
from {{ source('raw', 'categories') }}
