select
    order_id,
    customer_id,
    order_ts,
    cast(order_ts as date) as order_date,
    lower(status) as status,
    lower(payment_method) as payment_method,
    channel,
    gross_amount_inr as gross_revenue_inr,
    discount_inr,
    net_amount_inr as net_revenue_inr,
    tax_inr,
    shipping_fee_inr,
    nullif(coupon_code, '') as coupon_code
from {{ source('raw', 'orders') }}
