/* recon_schema.h — JSON Schema fragments shared by the recon and phantom kinds (string literals). */
#ifndef GJ_RECON_SCHEMA_H
#define GJ_RECON_SCHEMA_H

#define RC_GEOMETRY_SCHEMA \
    "{\"type\":\"object\",\"additionalProperties\":false,\"required\":[\"type\",\"angles_deg\",\"detector\"]," \
    "\"description\":\"acquisition geometry; lengths in mm\"," \
    "\"properties\":{" \
    "\"type\":{\"enum\":[\"parallel2d\",\"fan2d\",\"cone3d\"]}," \
    "\"angles_deg\":{\"anyOf\":[" \
    "{\"type\":\"array\",\"minItems\":1,\"maxItems\":100000,\"items\":{\"type\":\"number\"}}," \
    "{\"type\":\"object\",\"additionalProperties\":false,\"required\":[\"count\"],\"properties\":{" \
    "\"start\":{\"type\":\"number\"},\"step\":{\"type\":\"number\"}," \
    "\"count\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":100000}}}]," \
    "\"description\":\"view angles in degrees: a list, or {start, step, count}\"}," \
    "\"detector\":{\"type\":\"object\",\"additionalProperties\":false,\"required\":[\"cols\"],\"properties\":{" \
    "\"cols\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":16384}," \
    "\"rows\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":16384}," \
    "\"spacing_u\":{\"type\":\"number\",\"exclusiveMinimum\":0}," \
    "\"spacing_v\":{\"type\":\"number\",\"exclusiveMinimum\":0}," \
    "\"offset_u\":{\"type\":\"number\"},\"offset_v\":{\"type\":\"number\"}}}," \
    "\"source_origin_mm\":{\"type\":\"number\",\"exclusiveMinimum\":0}," \
    "\"source_detector_mm\":{\"type\":\"number\",\"exclusiveMinimum\":0}," \
    "\"matrices\":{\"type\":\"array\",\"maxItems\":100000,\"items\":{\"type\":\"array\",\"minItems\":12," \
    "\"maxItems\":12,\"items\":{\"type\":\"number\"}}," \
    "\"description\":\"cone3d: one 3x4 projection matrix per view, 12 numbers column-major (RabbitCT)\"}" \
    "}}"

#define RC_VOLUME_SCHEMA \
    "{\"type\":\"object\",\"additionalProperties\":false,\"required\":[\"nx\",\"ny\"]," \
    "\"description\":\"reconstruction grid; a 2D batch is nx x ny x batch\"," \
    "\"properties\":{" \
    "\"nx\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":16384}," \
    "\"ny\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":16384}," \
    "\"nz\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":16384}," \
    "\"voxel_mm\":{\"anyOf\":[{\"type\":\"number\",\"exclusiveMinimum\":0},{\"type\":\"array\"," \
    "\"minItems\":1,\"maxItems\":3,\"items\":{\"type\":\"number\",\"exclusiveMinimum\":0}}]}," \
    "\"offset_mm\":{\"type\":\"array\",\"minItems\":1,\"maxItems\":3,\"items\":{\"type\":\"number\"}}" \
    "}}"

#endif
