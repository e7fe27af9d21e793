select return_id, order_id, return_date, reason, refund_inr
from {{ source('raw', 'returns') }}
