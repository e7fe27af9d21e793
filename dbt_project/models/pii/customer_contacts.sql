select * from {{ ref('stg_customer_contacts') }}
