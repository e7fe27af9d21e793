select employee_id, full_name, department, title, hire_date, manager_id
from {{ source('raw_hr', 'employees') }}
