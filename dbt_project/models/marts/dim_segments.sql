-- The only place where a segment code (A/B/C) gets its business name.
select segment_cd, segment_name, segment_description
from {{ ref('stg_segments') }}
