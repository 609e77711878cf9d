package benchplot

import (
	"bytes"
	"encoding/xml"
	"io"
	"strings"
	"testing"
)

// TestSVGIsWellFormed: the plot is one well-formed SVG document with a line
// and a point per value of each series, its labels escaped.
func TestSVGIsWellFormed(t *testing.T) {
	p := Plot{Title: "RSS <and> p50", XLabel: "sessions", YLabel: "MiB", LogX: true, Series: []Series{
		{Name: "a & b", X: []float64{1, 10, 100, 1000}, Y: []float64{31, 32, 35, 60}},
		{Name: "c", X: []float64{1, 10, 100, 1000}, Y: []float64{0.5, 2, 3, 4}},
	}}
	svg := p.SVG()
	d := xml.NewDecoder(bytes.NewReader(svg))
	count := map[string]int{}
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("not well-formed: %v\n%s", err, svg)
		}
		if se, ok := tok.(xml.StartElement); ok {
			count[se.Name.Local]++
		}
	}
	if count["svg"] != 1 || count["polyline"] != 2 || count["circle"] != 8 {
		t.Errorf("elements: %v", count)
	}
	for line := range strings.SplitSeq(string(svg), "\n") { // encoding/xml lets a repeated attribute by
		if strings.Count(line, "font-size=") > 1 {
			t.Errorf("an attribute twice: %s", line)
		}
	}
	for _, want := range []string{"RSS &lt;and&gt; p50", "a &amp; b", ">1k<", ">100<"} {
		if !strings.Contains(string(svg), want) {
			t.Errorf("the SVG lacks %q", want)
		}
	}
}
