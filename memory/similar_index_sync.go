package memory

import (
	"context"
	"database/sql"
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// indexState keeps the in-memory index (see index.go) in step with
// SQLite. The index is built in the background when memory opens;
// until it is ready, similarity lookups use vec0.
type indexState struct {
	idx   *index
	ready atomic.Bool

	// Set when data_version moved (another connection committed): new
	// vectors may exist (catchUp), and after an invalidation, held ones
	// may be gone (prune). Done by the next similarity lookup.
	catchUp, prune atomic.Bool

	mu     sync.Mutex // serialises build, catch-up and prune
	lastID int64      // every entry id up to this one has been read
}

// vecDimsTables returns the dimensions of the vec0 tables in the database.
func (s *store) vecDimsTables(ctx context.Context) ([]int, error) {
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
		if d, err := strconv.Atoi(strings.TrimPrefix(name, "vec_f")); err == nil && d > 0 && d <= maxDims {
			out = append(out, d)
		}
	}
	return out, rows.Err()
}

// build reads every stored vector into the index.
func (is *indexState) build(ctx context.Context, s *store) error {
	is.mu.Lock()
	defer is.mu.Unlock()
	var maxID int64
	if err := s.db.QueryRowContext(ctx, `SELECT coalesce(max(id), 0) FROM entries`).Scan(&maxID); err != nil {
		return fmt.Errorf("build index: %w", err)
	}
	dims, err := s.vecDimsTables(ctx)
	if err != nil {
		return fmt.Errorf("build index: %w", err)
	}
	for _, d := range dims {
		rows, err := s.db.QueryContext(ctx, `SELECT rowid, part, embedding FROM `+vecTable(d))
		if err != nil {
			return fmt.Errorf("build index: %w", err)
		}
		for rows.Next() {
			var (
				id, part int64
				blob     []byte
			)
			if err := rows.Scan(&id, &part, &blob); err != nil {
				rows.Close()
				return fmt.Errorf("build index: %w", err)
			}
			if v := blobVec(blob); len(v) == d {
				is.idx.add(part, id, v)
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("build index: %w", err)
		}
	}
	// Vectors stored after maxID are read by the next catch-up (a store
	// that committed during the scan may already be held: add replaces).
	is.lastID = maxID
	is.ready.Store(true)
	return nil
}

// refresh applies what other connections committed since the last look:
// new vectors, and after an invalidation, entries gone.
func (is *indexState) refresh(ctx context.Context, s *store) error {
	if !is.catchUp.Load() && !is.prune.Load() {
		return nil
	}
	is.mu.Lock()
	defer is.mu.Unlock()
	if is.catchUp.Swap(false) {
		if err := is.readNew(ctx, s); err != nil {
			is.catchUp.Store(true)
			return err
		}
	}
	if is.prune.Swap(false) {
		if err := is.pruneGone(ctx, s); err != nil {
			is.prune.Store(true)
			return err
		}
	}
	return nil
}

// readNew adds the vectors of entries after lastID.
func (is *indexState) readNew(ctx context.Context, s *store) error {
	type row struct {
		id   int64
		dims int
	}
	rows, err := s.db.QueryContext(ctx, `SELECT id, coalesce(vec_dims, 0) FROM entries WHERE id > ? ORDER BY id`, is.lastID)
	if err != nil {
		return fmt.Errorf("index catch-up: %w", err)
	}
	var news []row
	last := is.lastID
	for rows.Next() {
		var r row
		if err := rows.Scan(&r.id, &r.dims); err != nil {
			rows.Close()
			return fmt.Errorf("index catch-up: %w", err)
		}
		last = r.id
		if r.dims > 0 {
			news = append(news, r)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("index catch-up: %w", err)
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
			return fmt.Errorf("index catch-up: %w", err)
		}
		if v := blobVec(blob); len(v) == r.dims {
			is.idx.add(part, r.id, v)
		}
	}
	is.lastID = last
	return nil
}

// pruneGone drops the entries SQLite no longer holds.
func (is *indexState) pruneGone(ctx context.Context, s *store) error {
	rows, err := s.db.QueryContext(ctx, `SELECT id FROM entries WHERE vec_dims IS NOT NULL`)
	if err != nil {
		return fmt.Errorf("index prune: %w", err)
	}
	live := make(map[int64]bool, is.idx.size())
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return fmt.Errorf("index prune: %w", err)
		}
		live[id] = true
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("index prune: %w", err)
	}
	is.idx.mu.Lock()
	var gone []int64
	for id := range is.idx.where {
		if !live[id] {
			gone = append(gone, id)
		}
	}
	for _, id := range gone {
		is.idx.removeLocked(is.idx.where[id], id)
	}
	is.idx.mu.Unlock()
	return nil
}

// blobVec decodes sqlite-vec's float32 blob.
func blobVec(b []byte) []float32 {
	v := make([]float32, len(b)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v
}

// indexNeighbours returns up to k stored entries nearest to sc.vec in
// its bucket, made by the same embedder, most similar first, found with
// the index and read back from SQLite. Candidates SQLite no longer holds
// are dropped from the index.
func (s *store) indexNeighbours(ctx context.Context, is *indexState, sc *semCall, k int) ([]candidate, error) {
	hits := is.idx.search(sc.part, sc.vec, k)
	if len(hits) == 0 {
		return nil, nil
	}
	sim := make(map[int64]float64, len(hits))
	var q strings.Builder
	q.WriteString(`SELECT id, result, created_at, duration_ms, free_text, bucket, embedder, vec_dims FROM entries WHERE id IN (`)
	args := make([]any, 0, len(hits))
	for i, h := range hits {
		if i > 0 {
			q.WriteByte(',')
		}
		q.WriteByte('?')
		args = append(args, h.id)
		sim[h.id] = h.similarity
	}
	q.WriteByte(')')
	rows, err := s.db.QueryContext(ctx, q.String(), args...)
	if err != nil {
		return nil, fmt.Errorf("nearest neighbours: %w", err)
	}
	defer rows.Close()
	var out []candidate
	found := map[int64]bool{}
	for rows.Next() {
		var (
			cd       candidate
			text     sql.NullString
			bucket   []byte
			embedder sql.NullString
			dims     sql.NullInt64
		)
		if err := rows.Scan(&cd.id, &cd.result, &cd.createdAt, &cd.durationMS, &text, &bucket, &embedder, &dims); err != nil {
			return nil, fmt.Errorf("nearest neighbours: %w", err)
		}
		found[cd.id] = true
		if string(bucket) != string(sc.bucket) || embedder.String != sc.emb.ID() || int(dims.Int64) != len(sc.vec) {
			continue // replaced by an entry of another bucket or embedder
		}
		cd.text, cd.similarity = text.String, sim[cd.id]
		out = append(out, cd)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("nearest neighbours: %w", err)
	}
	for _, h := range hits {
		if !found[h.id] {
			is.idx.remove(h.id)
		}
	}
	sortCandidates(out)
	return out, nil
}

func sortCandidates(cs []candidate) {
	for i := 1; i < len(cs); i++ {
		for j := i; j > 0 && cs[j].similarity > cs[j-1].similarity; j-- {
			cs[j], cs[j-1] = cs[j-1], cs[j]
		}
	}
}
