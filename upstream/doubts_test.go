package upstream

import "testing"

// TestDoubtClearedOnlyByALaterPing: a doubt is cleared by the answer to a ping
// sent after it was raised, never by one already on its way.
func TestDoubtClearedOnlyByALaterPing(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		steps string // r: a doubt raised; s: a ping sent; a: the last ping sent answered
		held  bool   // calls still wait at the end
	}{
		{name: "none raised", steps: "sa", held: false},
		{name: "raised, then pinged", steps: "rsa", held: false},
		{name: "raised while the ping was on its way", steps: "sra", held: true},
		{name: "raised again while its ping was on its way", steps: "rsra", held: true},
		{name: "and pinged once more", steps: "rsrasa", held: false},
		{name: "raised twice before the ping", steps: "rrsa", held: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := NewDoubts()
			var sent uint64
			for _, step := range tt.steps {
				switch step {
				case 'r':
					d.Raise()
				case 's':
					select { // the ping loop takes the wake-up it pings for
					case <-d.Wake():
					default:
					}
					sent = d.Sending()
				case 'a':
					d.Settle(sent)
				}
			}
			if held := d.Held() != nil; held != tt.held {
				t.Errorf("after %q: calls held %v, want %v", tt.steps, held, tt.held)
			}
		})
	}
}
