"""The error codes model load and execute return (acl_base.h and GE's ge_error_codes.h).

Which failure gets which code is listed in docs/model.md ("Errors").
"""

from __future__ import annotations

# acl_base.h
INVALID_MODEL_ID = 100011  # ACL_ERROR_INVALID_MODEL_ID: no loaded model has this id (or it was unloaded)
DESERIALIZE_MODEL = 100012  # ACL_ERROR_DESERIALIZE_MODEL: truncated, foreign or newer .om
READ_MODEL_FAILURE = 100014  # ACL_ERROR_READ_MODEL_FAILURE: the file cannot be read
MODEL_INPUT_NOT_MATCH = 100017  # ACL_ERROR_MODEL_INPUT_NOT_MATCH: input dataset count or sizes
MODEL_OUTPUT_NOT_MATCH = 100018  # ACL_ERROR_MODEL_OUTPUT_NOT_MATCH: output dataset count or sizes
MODEL_NOT_DYNAMIC = 100019  # ACL_ERROR_MODEL_NOT_DYNAMIC: dynamic-batch call on a static model
# ge_error_codes.h
GE_PARAM_INVALID = 145000  # ACL_ERROR_GE_PARAM_INVALID: work/weight memory smaller than query_size
GE_DYNAMIC_BATCH_SIZE_INVALID = 145013  # ACL_ERROR_GE_DYNAMIC_BATCH_SIZE_INVALID: no such gear
