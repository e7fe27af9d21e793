select
    customer_id,
    city,
    state_code,
    upper(trim(segment_cd)) as segment_cd,
    signup_date,
    acquisition_channel
from {{ source('raw', 'customers') }}
