package jsonrpc

import "encoding/json"

// IDScanner finds the top-level "id" of a JSON-RPC message while the message streams
// past, in constant memory: an over-size request is never held whole, yet its answer
// must carry its id, or the client waits forever for a response it cannot match.
// It reads bytes only; a message that is not JSON simply yields no id.
type IDScanner struct {
	depth     int
	inString  bool
	escaped   bool
	expectKey bool   // at depth 1, the next string is a key
	inKey     bool   // reading a top-level key
	key       []byte // that key, while it is short enough to be "id"
	keyIsID   bool   // the last top-level key was "id"
	wantID    bool   // the value being read is the id
	value     []byte // the id's bytes so far
	id        json.RawMessage
}

// maxIDBytes bounds the id kept; a longer id is not one a client would send.
const maxIDBytes = 256

// Write scans p, the next bytes of the message; it never fails, so that an
// IDScanner is an io.Writer to copy a body into.
func (s *IDScanner) Write(p []byte) (int, error) {
	for _, c := range p {
		if s.id != nil {
			return len(p), nil
		}
		s.step(c)
	}
	return len(p), nil
}

func (s *IDScanner) step(c byte) {
	if s.wantID {
		s.readID(c)
		return
	}
	if s.inString {
		switch {
		case s.escaped:
			s.escaped = false
		case c == '\\':
			s.escaped = true
		case c == '"':
			s.inString = false
			if s.inKey {
				s.inKey = false
				s.keyIsID = string(s.key) == "id"
			}
			return
		}
		if s.inKey && len(s.key) <= 2 {
			s.key = append(s.key, c)
		}
		return
	}
	switch c {
	case '"':
		s.inString = true
		s.inKey = s.depth == 1 && s.expectKey
		s.expectKey = false
		s.key = s.key[:0]
	case '{':
		s.depth++
		s.expectKey = s.depth == 1
	case '[':
		s.depth++
	case '}', ']':
		s.depth--
	case ':':
		if s.depth == 1 && s.keyIsID {
			s.wantID = true
		}
		s.keyIsID = false
	case ',':
		s.expectKey = s.depth == 1
	}
}

// readID collects the id value: a string or a number, ended by ',' or '}'.
func (s *IDScanner) readID(c byte) {
	if len(s.value) == 0 && (c == ' ' || c == '\t' || c == '\r' || c == '\n') {
		return
	}
	if len(s.value) > 0 && s.value[0] == '"' {
		s.value = append(s.value, c)
		switch {
		case s.escaped:
			s.escaped = false
		case c == '\\':
			s.escaped = true
		case c == '"' && len(s.value) > 1:
			s.finish()
		}
	} else if c == ',' || c == '}' || c == ' ' || c == '\t' || c == '\r' || c == '\n' {
		s.finish()
	} else {
		s.value = append(s.value, c)
	}
	if len(s.value) > maxIDBytes {
		s.wantID, s.value = false, nil // give up: not an id anyone can use
		s.id = json.RawMessage{}
	}
}

func (s *IDScanner) finish() {
	s.wantID = false
	if len(s.value) > 0 && json.Valid(s.value) && ValidID(s.value) {
		s.id = json.RawMessage(append([]byte(nil), s.value...))
		return
	}
	s.id = json.RawMessage{}
}

// ID is the id found, or nil.
func (s *IDScanner) ID() json.RawMessage {
	if len(s.id) == 0 {
		return nil
	}
	return s.id
}
