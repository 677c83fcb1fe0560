//! The types the generated message tables are written in: how one protobuf field maps
//! to JSON.

/// How a protobuf field maps to JSON. (`F64` and `Duration` are emitted by the generator
/// for kinds that have such fields; none of the kinds served today do.)
#[derive(Clone, Copy)]
#[allow(dead_code)]
pub(super) enum Ty {
    /// `string`.
    Str,
    /// `int32` / `int64` (varint; negative int32 values are sign-extended).
    Int,
    /// `bool`.
    Bool,
    /// `double` (fixed64).
    F64,
    /// `bytes`, base64 in JSON.
    Bytes,
    /// `metav1.Time` / `MicroTime` {1: seconds, 2: nanos}: RFC 3339.
    Time,
    /// `metav1.Duration` {1: nanoseconds}: a Go duration string.
    Duration,
    /// `runtime.RawExtension` / `FieldsV1` {1: raw JSON bytes}.
    Raw,
    /// `resource.Quantity` {1: string}.
    Quantity,
    /// `intstr.IntOrString` {1: type, 2: intVal, 3: strVal}.
    IntOrString,
    /// A nested message.
    Msg(&'static [F]),
    /// A repeated field.
    Rep(&'static Ty),
    /// A `map<string, _>` (repeated entries {1: key, 2: value}).
    Map(&'static Ty),
}

/// (field number, JSON name, type, whether a zero value is kept): the generator sets the
/// last for integers and booleans that the JSON form always writes (required fields).
pub(super) type F = (u32, &'static str, Ty, bool);
