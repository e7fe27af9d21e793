-- One row per order date x payment method x status.
select
    order_date,
    payment_method,
    status,
    count(*) as orders,
    sum(units) as units,
    sum(gross_revenue_inr) as gross_revenue_inr,
    sum(discount_inr) as discount_inr,
    sum(net_revenue_inr) as net_revenue_inr
from {{ ref('fct_orders') }}
group by order_date, payment_method, status
