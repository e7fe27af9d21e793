select * from {{ ref('stg_employees') }}
