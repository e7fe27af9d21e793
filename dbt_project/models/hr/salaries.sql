select * from {{ ref('stg_salaries') }}
