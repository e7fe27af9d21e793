select
    i.order_item_id,
    i.order_id,
    o.order_date,
    o.status,
    o.customer_id,
    i.product_id,
    i.quantity,
    i.unit_price_inr,
    i.gross_revenue_inr,
    i.discount_inr,
    i.net_revenue_inr
from {{ ref('stg_order_items') }} i
join {{ ref('stg_orders') }} o using (order_id)
