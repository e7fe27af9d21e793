-- One row per calendar month. Revenue columns exclude cancelled orders (see the glossary).
select
    order_month,
    count(*) as orders,
    count(*) filter (where status = 'delivered') as delivered_orders,
    count(*) filter (where status = 'cancelled') as cancelled_orders,
    count(*) filter (where status = 'returned') as returned_orders,
    count(distinct customer_id) filter (where status <> 'cancelled') as ordering_customers,
    coalesce(sum(gross_revenue_inr) filter (where status <> 'cancelled'), 0) as gross_revenue_inr,
    coalesce(sum(discount_inr) filter (where status <> 'cancelled'), 0) as discount_inr,
    coalesce(sum(net_revenue_inr) filter (where status <> 'cancelled'), 0) as net_revenue_inr,
    coalesce(sum(refund_inr), 0) as refunds_inr
from {{ ref('fct_orders') }}
group by order_month
