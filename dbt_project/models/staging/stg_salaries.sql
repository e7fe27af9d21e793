select employee_id, effective_date, annual_ctc_inr, bonus_inr
from {{ source('raw_hr', 'salaries') }}
