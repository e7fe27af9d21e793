with items as (
    select order_id, count(*) as item_count, sum(quantity) as units
    from {{ ref('stg_order_items') }}
    group by order_id
),
rets as (
    select order_id, return_date, refund_inr
    from {{ ref('stg_returns') }}
)
select
    o.order_id,
    o.customer_id,
    o.order_ts,
    o.order_date,
    cast(date_trunc('month', o.order_date) as date) as order_month,
    o.status,
    o.payment_method,
    o.channel,
    i.item_count,
    i.units,
    o.gross_revenue_inr,
    o.discount_inr,
    o.net_revenue_inr,
    o.tax_inr,
    o.shipping_fee_inr,
    o.net_revenue_inr + o.tax_inr + o.shipping_fee_inr as total_paid_inr,
    o.coupon_code,
    r.order_id is not null as is_returned,
    r.return_date,
    coalesce(r.refund_inr, 0) as refund_inr
from {{ ref('stg_orders') }} o
join items i using (order_id)
left join rets r using (order_id)
