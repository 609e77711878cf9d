package memory

import (
	"database/sql"
	"encoding/binary"
	"math"
	"path/filepath"
	"testing"

	_ "modernc.org/sqlite/vec"
)

func blobOf(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, f := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(f))
	}
	return b
}

func TestZZProbe(t *testing.T) {
	db, err := sql.Open("sqlite", filepath.Join(t.TempDir(), "x.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, s := range []string{
		`CREATE TABLE e (id INTEGER PRIMARY KEY, d INTEGER)`,
		`CREATE VIRTUAL TABLE IF NOT EXISTS v4 USING vec0(part INTEGER PARTITION KEY, embedding float[4] distance_metric=cosine)`,
		`CREATE VIRTUAL TABLE IF NOT EXISTS v4 USING vec0(part INTEGER PARTITION KEY, embedding float[4] distance_metric=cosine)`,
		`CREATE TRIGGER IF NOT EXISTS v4_ad AFTER DELETE ON e WHEN OLD.d = 4 BEGIN DELETE FROM v4 WHERE rowid = OLD.id; END`,
	} {
		if _, err := db.Exec(s); err != nil {
			t.Fatal(s, err)
		}
	}
	for i, v := range [][]float32{{1, 0, 0, 0}, {0.9, 0.1, 0, 0}, {0, 1, 0, 0}, {1, 0, 0, 0}} {
		db.Exec(`INSERT INTO e (id, d) VALUES (?, 4)`, i+1)
		part := int64(7)
		if i == 3 {
			part = -8
		}
		if _, err := db.Exec(`INSERT INTO v4 (rowid, part, embedding) VALUES (?, ?, ?)`, i+1, part, blobOf(v)); err != nil {
			t.Fatal(err)
		}
	}
	q := func() {
		rows, err := db.Query(`SELECT rowid, distance FROM v4 WHERE embedding MATCH ? AND k = ? AND part = ?`, blobOf([]float32{1, 0.05, 0, 0}), 3, 7)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var id int64
			var d float64
			rows.Scan(&id, &d)
			t.Log(id, d)
		}
		rows.Close()
	}
	q()
	if _, err := db.Exec(`DELETE FROM e WHERE id = 1`); err != nil {
		t.Fatal(err)
	}
	q()
	var n int
	db.QueryRow(`SELECT count(*) FROM v4`).Scan(&n)
	t.Log("count", n)
}
