package tgpostgres

import (
	"encoding/binary"
	"slices"
	"unsafe"

	"github.com/jackc/pgx/v5/pgtype"
)

// The store sends its batches as arrays: a batch's updates, events and
// locks travel as one text[], bigint[], int[] or bytea[] parameter per
// column (unnest). pgx encodes a Go slice as an array through its generic
// path, which boxes every element in an interface, looks up its plan, and
// sizes it twice: at PostgreSQL W=32 that was 8.5% of the process's CPU.
// registerArrays puts, on a connection's type map, codecs that write
// []string, []int64, []int32 and [][]byte straight into PostgreSQL's
// binary array format, byte for byte what pgx writes
// (TestArrayEncodingMatchesPgx); every other value, and every read, goes
// to pgx's own array codec unchanged.

// arrayTypes are the array types registerArrays speeds up, with their
// elements' types.
var arrayTypes = []struct{ oid, elem uint32 }{
	{pgtype.TextArrayOID, pgtype.TextOID},
	{pgtype.Int8ArrayOID, pgtype.Int8OID},
	{pgtype.Int4ArrayOID, pgtype.Int4OID},
	{pgtype.ByteaArrayOID, pgtype.ByteaOID},
}

// registerArrays registers the fast array codecs on m (a connection's
// type map, in AfterConnect). A type m does not have as pgx's array codec
// is left as it is.
func registerArrays(m *pgtype.Map) {
	for _, a := range arrayTypes {
		t, ok := m.TypeForOID(a.oid)
		if !ok {
			continue
		}
		ac, ok := t.Codec.(*pgtype.ArrayCodec)
		if !ok || ac.ElementType == nil || ac.ElementType.OID != a.elem {
			continue
		}
		m.RegisterType(&pgtype.Type{Name: t.Name, OID: t.OID, Codec: &arrayCodec{ArrayCodec: ac}})
	}
}

// arrayCodec is pgx's array codec with binary encoders of its own for
// the slices the store sends.
type arrayCodec struct {
	*pgtype.ArrayCodec
}

// PlanEncode returns the direct encoder of value's slice type when the
// format is binary and the element type matches, else pgx's plan.
func (c *arrayCodec) PlanEncode(m *pgtype.Map, oid uint32, format int16, value any) pgtype.EncodePlan {
	if format == pgtype.BinaryFormatCode {
		switch value.(type) {
		case []string:
			if c.ElementType.OID == pgtype.TextOID {
				return textArrayPlan{}
			}
		case []int64:
			if c.ElementType.OID == pgtype.Int8OID {
				return intArrayPlan[int64]{elem: pgtype.Int8OID}
			}
		case []int32:
			if c.ElementType.OID == pgtype.Int4OID {
				return intArrayPlan[int32]{elem: pgtype.Int4OID}
			}
		case [][]byte:
			if c.ElementType.OID == pgtype.ByteaOID {
				return byteaArrayPlan{}
			}
		}
	}
	return c.ArrayCodec.PlanEncode(m, oid, format, value)
}

// appendArrayHeader appends the header of a one-dimensional array of n
// elements of type elem, as pgx writes it (a non-nil empty slice is one
// dimension of length 0), and returns where its has-null flag is.
func appendArrayHeader(buf []byte, n int, elem uint32) ([]byte, int) {
	buf = binary.BigEndian.AppendUint32(buf, 1) // dimensions
	at := len(buf)
	buf = binary.BigEndian.AppendUint32(buf, 0) // has nulls
	buf = binary.BigEndian.AppendUint32(buf, elem)
	buf = binary.BigEndian.AppendUint32(buf, uint32(n))
	buf = binary.BigEndian.AppendUint32(buf, 1) // lower bound
	return buf, at
}

// textArrayPlan encodes a []string as text[]; nil is NULL.
type textArrayPlan struct{}

// Encode appends value, a []string, to buf.
func (textArrayPlan) Encode(value any, buf []byte) ([]byte, error) {
	a := value.([]string)
	if a == nil {
		return nil, nil
	}
	size := 20
	for _, s := range a {
		size += 4 + len(s)
	}
	buf = slices.Grow(buf, size)
	buf, _ = appendArrayHeader(buf, len(a), pgtype.TextOID)
	for _, s := range a {
		buf = binary.BigEndian.AppendUint32(buf, uint32(len(s)))
		buf = append(buf, s...)
	}
	return buf, nil
}

// intArrayPlan encodes a []int64 as bigint[] or a []int32 as int[]
// (elem); nil is NULL.
type intArrayPlan[T int32 | int64] struct{ elem uint32 }

// Encode appends value, a []T, to buf.
func (p intArrayPlan[T]) Encode(value any, buf []byte) ([]byte, error) {
	a := value.([]T)
	if a == nil {
		return nil, nil
	}
	width := int(unsafe.Sizeof(T(0))) // a constant: 8 or 4, no memory read
	buf = slices.Grow(buf, 20+(4+width)*len(a))
	buf, _ = appendArrayHeader(buf, len(a), p.elem)
	for _, v := range a {
		buf = binary.BigEndian.AppendUint32(buf, uint32(width))
		if width == 8 {
			buf = binary.BigEndian.AppendUint64(buf, uint64(v))
		} else {
			buf = binary.BigEndian.AppendUint32(buf, uint32(v))
		}
	}
	return buf, nil
}

// byteaArrayPlan encodes a [][]byte as bytea[]; nil is NULL, and so is a
// nil element.
type byteaArrayPlan struct{}

// Encode appends value, a [][]byte, to buf.
func (byteaArrayPlan) Encode(value any, buf []byte) ([]byte, error) {
	a := value.([][]byte)
	if a == nil {
		return nil, nil
	}
	size := 20
	for _, b := range a {
		size += 4 + len(b)
	}
	buf = slices.Grow(buf, size)
	buf, nullAt := appendArrayHeader(buf, len(a), pgtype.ByteaOID)
	for _, b := range a {
		if b == nil {
			binary.BigEndian.PutUint32(buf[nullAt:], 1)
			buf = binary.BigEndian.AppendUint32(buf, 0xFFFFFFFF) // -1: NULL
			continue
		}
		buf = binary.BigEndian.AppendUint32(buf, uint32(len(b)))
		buf = append(buf, b...)
	}
	return buf, nil
}
