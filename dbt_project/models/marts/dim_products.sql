select
    p.product_id,
    p.product_name,
    p.category_id,
    c.category_name,
    c.department,
    p.brand,
    p.list_price_inr,
    p.launched_on,
    p.description
from {{ ref('stg_products') }} p
join {{ ref('stg_categories') }} c using (category_id)
