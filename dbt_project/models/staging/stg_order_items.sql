select
    order_item_id,
    order_id,
    product_id,
    quantity,
    unit_price_inr,
    line_gross_inr as gross_revenue_inr,
    line_discount_inr as discount_inr,
    line_gross_inr - line_discount_inr as net_revenue_inr
from {{ source('raw', 'order_items') }}
