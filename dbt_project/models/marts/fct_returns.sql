select
    r.return_id,
    r.order_id,
    o.customer_id,
    o.order_date,
    r.return_date,
    r.reason,
    r.refund_inr,
    o.payment_method
from {{ ref('stg_returns') }} r
join {{ ref('stg_orders') }} o using (order_id)
