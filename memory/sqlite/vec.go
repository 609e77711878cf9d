package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"

	_ "modernc.org/sqlite/vec" // registers vec0 on every connection

	"github.com/nexus-mcp/nexus/memory"
)

// vecTable is the vec0 table holding vectors of dims dimensions.
func vecTable(dims int) string { return fmt.Sprintf("vec_f%d", dims) }

// ensureVecTable creates, once per database, the vec0 table for dims and
// the triggers that drop a vector with its entry (deleted, evicted,
// invalidated, expired) or when the entry is replaced.
func (s *Store) ensureVecTable(ctx context.Context, tx *sql.Tx, dims int) error {
	if _, ok := s.vecTables.Load(dims); ok {
		return nil
	}
	t := vecTable(dims)
	for _, q := range []string{
		fmt.Sprintf(`CREATE VIRTUAL TABLE IF NOT EXISTS %s USING vec0(
			part INTEGER PARTITION KEY, embedding float[%d] distance_metric=cosine)`, t, dims),
		fmt.Sprintf(`CREATE TRIGGER IF NOT EXISTS %[1]s_ad AFTER DELETE ON entries WHEN OLD.vec_dims = %[2]d
			BEGIN DELETE FROM %[1]s WHERE rowid = OLD.id; END`, t, dims),
		fmt.Sprintf(`CREATE TRIGGER IF NOT EXISTS %[1]s_au AFTER UPDATE OF result ON entries WHEN OLD.vec_dims = %[2]d
			BEGIN DELETE FROM %[1]s WHERE rowid = OLD.id; END`, t, dims),
	} {
		if _, err := tx.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("create vector table: %w", err)
		}
	}
	// Known only once committed; a rolled-back creation is redone (IF NOT EXISTS).
	return nil
}

// storeVector writes sc's vector for entry id (whose row already names
// its bucket, embedder and dims).
func (s *Store) storeVector(ctx context.Context, tx *sql.Tx, id int64, sc *memory.FreeText) error {
	if err := s.ensureVecTable(ctx, tx, len(sc.Vec)); err != nil {
		return err
	}
	t := vecTable(len(sc.Vec))
	if _, err := tx.ExecContext(ctx, `DELETE FROM `+t+` WHERE rowid = ?`, id); err != nil {
		return fmt.Errorf("store vector: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO `+t+` (rowid, part, embedding) VALUES (?, ?, ?)`,
		id, sc.Part, memory.EncodeVector(sc.Vec)); err != nil {
		return fmt.Errorf("store vector: %w", err)
	}
	return nil
}

// scanNeighbours returns up to k stored entries nearest to sc.vec in its
// bucket, made by the same embedder, most similar first, by vec0's scan.
func (s *Store) ScanNeighbours(ctx context.Context, sc *memory.FreeText, k int) ([]memory.Candidate, error) {
	dims := len(sc.Vec)
	if _, ok := s.vecTables.Load(dims); !ok {
		var n int
		err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_schema WHERE name = ?`, vecTable(dims)).Scan(&n)
		if err != nil {
			return nil, fmt.Errorf("find vector table: %w", err)
		}
		if n == 0 {
			return nil, nil // nothing of this embedder's size stored yet
		}
		s.vecTables.Store(dims, true)
	}
	rows, err := s.db.QueryContext(ctx, fmt.Sprintf(`
		WITH knn AS (
			SELECT rowid AS id, distance FROM %s
			WHERE embedding MATCH ?1 AND k = ?2 AND part = ?3)
		SELECT e.id, knn.distance, e.result, e.created_at, e.duration_ms, e.free_text, e.stale
		FROM knn JOIN entries AS e ON e.id = knn.id
		WHERE e.bucket = ?4 AND e.embedder = ?5 AND e.vec_dims = ?6
		ORDER BY knn.distance`, vecTable(dims)),
		memory.EncodeVector(sc.Vec), k, sc.Part, sc.Bucket, sc.Embedder.ID(), dims)
	if err != nil {
		return nil, fmt.Errorf("nearest neighbours: %w", err)
	}
	defer rows.Close()
	var out []memory.Candidate
	for rows.Next() {
		var (
			cd   memory.Candidate
			dist float64
		)
		if err := rows.Scan(&cd.ID, &dist, &cd.Result, &cd.CreatedAt, &cd.DurationMS, &cd.Text, &cd.Stale); err != nil {
			return nil, fmt.Errorf("nearest neighbours: %w", err)
		}
		cd.Similarity = 1 - dist
		out = append(out, cd)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("nearest neighbours: %w", err)
	}
	return out, nil
}

// vecDimsTables returns the dimensions of the vec0 tables in the database.
func (s *Store) vecDimsTables(ctx context.Context) ([]int, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT name FROM sqlite_schema WHERE type = 'table' AND name GLOB 'vec_f[0-9]*'`)
	if err != nil {
		return nil, fmt.Errorf("list vector tables: %w", err)
	}
	defer rows.Close()
	var out []int
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			return nil, fmt.Errorf("list vector tables: %w", err)
		}
		if d, err := strconv.Atoi(strings.TrimPrefix(name, "vec_f")); err == nil && d > 0 && d <= memory.MaxDims {
			out = append(out, d)
		}
	}
	return out, rows.Err()
}

// vectorsSince reads the vectors of entries after id cursor: all of them
// from the vec0 tables when cursor is 0, else entry by entry. Ids are
// never reused and SQLite has one writer at a time, so the highest id
// read is the next cursor.
func (s *Store) VectorsSince(ctx context.Context, cursor int64, add func(id, part int64, vec []float32)) (int64, error) {
	if cursor == 0 {
		return s.allVectors(ctx, add)
	}
	type row struct {
		id   int64
		dims int
	}
	rows, err := s.db.QueryContext(ctx, `SELECT id, coalesce(vec_dims, 0) FROM entries WHERE id > ? ORDER BY id`, cursor)
	if err != nil {
		return cursor, err
	}
	var news []row
	last := cursor
	for rows.Next() {
		var r row
		if err := rows.Scan(&r.id, &r.dims); err != nil {
			rows.Close()
			return cursor, err
		}
		last = r.id
		if r.dims > 0 {
			news = append(news, r)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return cursor, err
	}
	for _, r := range news {
		var (
			part int64
			blob []byte
		)
		err := s.db.QueryRowContext(ctx, `SELECT part, embedding FROM `+vecTable(r.dims)+` WHERE rowid = ?`, r.id).Scan(&part, &blob)
		if err == sql.ErrNoRows {
			continue // deleted since
		}
		if err != nil {
			return cursor, err
		}
		if v := memory.DecodeVector(blob); len(v) == r.dims {
			add(r.id, part, v)
		}
	}
	return last, nil
}

func (s *Store) allVectors(ctx context.Context, add func(id, part int64, vec []float32)) (int64, error) {
	var maxID int64
	if err := s.db.QueryRowContext(ctx, `SELECT coalesce(max(id), 0) FROM entries`).Scan(&maxID); err != nil {
		return 0, err
	}
	dims, err := s.vecDimsTables(ctx)
	if err != nil {
		return 0, err
	}
	for _, d := range dims {
		rows, err := s.db.QueryContext(ctx, `SELECT rowid, part, embedding FROM `+vecTable(d))
		if err != nil {
			return 0, err
		}
		for rows.Next() {
			var (
				id, part int64
				blob     []byte
			)
			if err := rows.Scan(&id, &part, &blob); err != nil {
				rows.Close()
				return 0, err
			}
			if v := memory.DecodeVector(blob); len(v) == d {
				add(id, part, v)
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return 0, err
		}
	}
	// Vectors stored after maxID are read by the next catch-up (a store
	// that committed during the scan may already be held: add replaces).
	return maxID, nil
}

func (s *Store) LiveVectorIDs(ctx context.Context) (map[int64]bool, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT id FROM entries WHERE vec_dims IS NOT NULL`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	live := map[int64]bool{}
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		live[id] = true
	}
	return live, rows.Err()
}

func (s *Store) Candidates(ctx context.Context, ids []int64) ([]memory.StoredCandidate, error) {
	var q strings.Builder
	q.WriteString(`SELECT id, result, created_at, duration_ms, stale, free_text, bucket, embedder, vec_dims FROM entries WHERE id IN (`)
	args := make([]any, 0, len(ids))
	for i, id := range ids {
		if i > 0 {
			q.WriteByte(',')
		}
		q.WriteByte('?')
		args = append(args, id)
	}
	q.WriteByte(')')
	rows, err := s.db.QueryContext(ctx, q.String(), args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []memory.StoredCandidate
	for rows.Next() {
		var (
			cd       memory.StoredCandidate
			text     sql.NullString
			embedder sql.NullString
			dims     sql.NullInt64
		)
		if err := rows.Scan(&cd.ID, &cd.Result, &cd.CreatedAt, &cd.DurationMS, &cd.Stale, &text, &cd.Bucket, &embedder, &dims); err != nil {
			return nil, err
		}
		cd.Text, cd.Embedder, cd.Dims = text.String, embedder.String, int(dims.Int64)
		out = append(out, cd)
	}
	return out, rows.Err()
}
