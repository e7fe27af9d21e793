select
    product_id,
    product_name,
    category_id,
    brand,
    list_price_inr,
    launched_on,
    description
from {{ source('raw', 'products') }}
