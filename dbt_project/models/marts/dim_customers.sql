with order_stats as (
    select
        customer_id,
        min(order_date) as first_order_date,
        max(order_date) as last_order_date,
        count(*) as lifetime_orders
    from {{ ref('stg_orders') }}
    group by customer_id
)
select
    c.customer_id,
    c.city,
    c.state_code,
    case
        when c.state_code in ('DL', 'RJ', 'UP', 'CH') then 'North'
        when c.state_code in ('KA', 'TG', 'TN', 'KL') then 'South'
        when c.state_code in ('MH', 'GJ', 'MP') then 'West'
        else 'East'
    end as region,
    c.segment_cd,
    c.signup_date,
    c.acquisition_channel,
    s.first_order_date,
    s.last_order_date,
    coalesce(s.lifetime_orders, 0) as lifetime_orders
from {{ ref('stg_customers') }} c
left join order_stats s using (customer_id)
