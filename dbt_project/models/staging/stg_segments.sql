select
    upper(trim(segment_cd)) as segment_cd,
    segment_name,
    segment_description
from {{ source('raw', 'segments') }}
