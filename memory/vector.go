package memory

import (
	"encoding/binary"
	"math"
)

// EncodeVector encodes v as little-endian float32s: sqlite-vec's blob, and
// the bytea column of PostgreSQL, so both stores hold vectors alike.
func EncodeVector(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, f := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(f))
	}
	return b
}

// DecodeVector decodes what EncodeVector encoded.
func DecodeVector(b []byte) []float32 {
	v := make([]float32, len(b)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v
}
