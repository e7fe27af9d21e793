select customer_id, full_name, email, phone, address_line, pincode
from {{ source('raw_pii', 'customer_contacts') }}
