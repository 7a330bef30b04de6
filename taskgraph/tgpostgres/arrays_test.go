package tgpostgres

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgpostgres/pgtest"
)

// arrayCases are the values TestArrayEncodingMatchesPgx and
// TestArraysRoundTrip send, by array type.
var arrayCases = []struct {
	oid   uint32
	cast  string
	value any
}{
	{pgtype.TextArrayOID, "text[]", []string(nil)},
	{pgtype.TextArrayOID, "text[]", []string{}},
	{pgtype.TextArrayOID, "text[]", []string{""}},
	{pgtype.TextArrayOID, "text[]", []string{"a", "", "tâche ✓", strings.Repeat("x", 70000), "NULL", "{\"q\",}"}},
	{pgtype.Int8ArrayOID, "bigint[]", []int64(nil)},
	{pgtype.Int8ArrayOID, "bigint[]", []int64{}},
	{pgtype.Int8ArrayOID, "bigint[]", []int64{0, 1, -1, 255, 256, math.MaxInt64, math.MinInt64}},
	{pgtype.Int4ArrayOID, "int[]", []int32(nil)},
	{pgtype.Int4ArrayOID, "int[]", []int32{}},
	{pgtype.Int4ArrayOID, "int[]", []int32{0, 7, -7, math.MaxInt32, math.MinInt32}},
	{pgtype.ByteaArrayOID, "bytea[]", [][]byte(nil)},
	{pgtype.ByteaArrayOID, "bytea[]", [][]byte{}},
	{pgtype.ByteaArrayOID, "bytea[]", [][]byte{{}, {0, 1, 0xff}}},
	{pgtype.ByteaArrayOID, "bytea[]", [][]byte{nil, {9}, nil}},
}

// TestArrayEncodingMatchesPgx: the codecs registerArrays registers take
// the slices the store sends, and write exactly the bytes pgx's own array
// codec writes for them (nil as NULL, an empty slice as one dimension of
// length 0, a nil bytea element as NULL), after bytes already in the
// buffer.
func TestArrayEncodingMatchesPgx(t *testing.T) {
	t.Parallel()
	fast := pgtype.NewMap()
	registerArrays(fast)
	plain := pgtype.NewMap()
	for _, c := range arrayCases {
		name := fmt.Sprintf("%T/%d", c.value, reflect.ValueOf(c.value).Len())
		if reflect.ValueOf(c.value).IsNil() {
			name += "/nil"
		}
		t.Run(name, func(t *testing.T) {
			switch p := fast.PlanEncode(c.oid, pgtype.BinaryFormatCode, c.value).(type) {
			case textArrayPlan, intArrayPlan[int64], intArrayPlan[int32], byteaArrayPlan:
			default:
				t.Fatalf("the plan for %T as OID %d is %T, not one of registerArrays'", c.value, c.oid, p)
			}
			prefix := []byte("prefix")
			want, err := plain.Encode(c.oid, pgtype.BinaryFormatCode, c.value, bytes.Clone(prefix))
			if err != nil {
				t.Fatal(err)
			}
			got, err := fast.Encode(c.oid, pgtype.BinaryFormatCode, c.value, bytes.Clone(prefix))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("encoded %d bytes %x\npgx writes %d bytes %x", len(got), head(got), len(want), head(want))
			}
		})
	}
	// What the codecs do not take goes to pgx's plan: a slice of another
	// element type, and the text format.
	if _, ok := fast.PlanEncode(pgtype.TextArrayOID, pgtype.BinaryFormatCode, []int64{1}).(intArrayPlan[int64]); ok {
		t.Error("an []int64 sent as text[] took the bigint[] encoder")
	}
	if _, ok := fast.PlanEncode(pgtype.TextArrayOID, pgtype.TextFormatCode, []string{"a"}).(textArrayPlan); ok {
		t.Error("the text format took the binary encoder")
	}
}

// head is the first bytes of b, for a failure message.
func head(b []byte) []byte { return b[:min(len(b), 96)] }

// TestArraysRoundTrip: every connection of an opened driver has the fast
// codecs, and what they send is what PostgreSQL reads: each value comes
// back as it was, with its NULLs and its length.
func TestArraysRoundTrip(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d, err := Open(ctx, pgtest.URL(t), Options{MaxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	conn, err := d.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	for _, a := range arrayTypes {
		typ, ok := conn.Conn().TypeMap().TypeForOID(a.oid)
		if !ok {
			t.Fatalf("no type for OID %d", a.oid)
		}
		if _, ok := typ.Codec.(*arrayCodec); !ok {
			t.Errorf("the driver's connection encodes %s with %T, not registerArrays' codec", typ.Name, typ.Codec)
		}
	}
	for _, c := range arrayCases {
		var isNull bool
		var n int
		back := reflect.New(reflect.TypeOf(c.value))
		err := conn.QueryRow(ctx, `SELECT $1::`+c.cast+` IS NULL, coalesce(cardinality($1::`+c.cast+`), -1), $1::`+c.cast, c.value).
			Scan(&isNull, &n, back.Interface())
		if err != nil {
			t.Fatalf("%s %v: %v", c.cast, c.value, err)
		}
		v := reflect.ValueOf(c.value)
		if isNull != v.IsNil() {
			t.Errorf("%s of %T (nil %v): PostgreSQL read NULL %v", c.cast, c.value, v.IsNil(), isNull)
			continue
		}
		if !v.IsNil() && n != v.Len() {
			t.Errorf("%s of %d elements: PostgreSQL read %d", c.cast, v.Len(), n)
		}
		if got := back.Elem().Interface(); !v.IsNil() && v.Len() > 0 && !reflect.DeepEqual(got, c.value) {
			t.Errorf("%s: sent %v, read back %v", c.cast, trim(c.value), trim(got))
		}
	}
	var count int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM unnest($1::bytea[]) AS b WHERE b IS NULL`, [][]byte{nil, {1}, nil}).Scan(&count); err != nil {
		t.Fatal(err)
	}
	if count != 2 {
		t.Errorf("two nil bytea elements: PostgreSQL read %d NULLs", count)
	}
}

// trim shortens a value for a failure message.
func trim(v any) string {
	s := fmt.Sprint(v)
	return s[:min(len(s), 200)]
}
