package status

import (
	"fmt"
	"html/template"
	"math"
	"strings"
	"time"

	"github.com/nexus-mcp/nexus/telemetry"
)

// series is one line of a plot: a value per minute, oldest first; ok says
// whether the minute has a value (a minute without calls has no latency).
type series struct {
	name  string
	class string // s1, s2: its colour in the page's style
	v     []float64
	ok    []bool
}

// plot geometry, in SVG user units (the plot scales to its box).
const (
	plotW, plotH       = 320.0, 110.0
	padL, padR         = 34.0, 6.0
	padT, padB         = 8.0, 18.0
	innerW, innerH     = plotW - padL - padR, plotH - padT - padB
	plotNowLabel       = "now"
	plotMaxTickDigits  = 4
	plotPointRadius    = 1.8
	plotMinYMax        = 1.0
	plotNumberOfTicksY = 2
)

// svgPlot draws series over the last hour as an inline SVG: a polyline each
// and a point for each minute that has a value, the y axis from 0 to the
// largest value (two ticks), the x axis from an hour ago to now. Every text is
// the plot's own (titles, numbers): nothing a client or a child chose.
func svgPlot(id, title, unit, since string, ss ...series) template.HTML {
	ymax := plotMinYMax
	n := 0
	for _, s := range ss {
		for i, v := range s.v {
			if s.ok[i] {
				ymax = math.Max(ymax, v)
				n++
			}
		}
	}
	ymax = niceCeil(ymax)
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="plot" id="%s" data-points="%d" viewBox="0 0 %g %g" role="img" aria-label="%s">`, id, n, plotW, plotH, template.HTMLEscapeString(title))
	fmt.Fprintf(&b, `<title>%s</title>`, template.HTMLEscapeString(title))
	// Grid and axes.
	for k := 0; k <= plotNumberOfTicksY; k++ {
		y := padT + innerH - innerH*float64(k)/plotNumberOfTicksY
		fmt.Fprintf(&b, `<line class="grid" x1="%g" y1="%.1f" x2="%g" y2="%.1f"/>`, padL, y, plotW-padR, y)
		fmt.Fprintf(&b, `<text class="tick" x="%g" y="%.1f" text-anchor="end">%s</text>`, padL-3, y+3, tick(ymax*float64(k)/plotNumberOfTicksY, unit))
	}
	fmt.Fprintf(&b, `<text class="tick" x="%g" y="%g">%s</text>`, padL, plotH-4, since)
	fmt.Fprintf(&b, `<text class="tick" x="%g" y="%g" text-anchor="end">%s</text>`, plotW-padR, plotH-4, plotNowLabel)
	for _, s := range ss {
		var pts []string
		var dots strings.Builder
		for i, v := range s.v {
			if !s.ok[i] {
				continue
			}
			x := padL + innerW*float64(i)/float64(max(len(s.v)-1, 1))
			y := padT + innerH - innerH*v/ymax
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x, y))
			fmt.Fprintf(&dots, `<circle class="pt %s" cx="%.1f" cy="%.1f" r="%g" data-v="%g"/>`, s.class, x, y, plotPointRadius, v)
		}
		if len(pts) > 1 {
			fmt.Fprintf(&b, `<polyline class="line %s" points="%s"/>`, s.class, strings.Join(pts, " "))
		}
		b.WriteString(dots.String())
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

// niceCeil rounds up to 1, 2 or 5 times a power of ten.
func niceCeil(v float64) float64 {
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if v <= m*p {
			return m * p
		}
	}
	return 10 * p
}

func tick(v float64, unit string) string {
	s := fmt.Sprintf("%.*g", plotMaxTickDigits, v)
	if unit == "ms" && v >= 1000 {
		s = fmt.Sprintf("%gs", v/1000)
		return s
	}
	return s + unit
}

// plots are the console's three plots of the last hour, and its totals.
type plots struct {
	Calls, Latency, Errors template.HTML
	// Day is the last day's plot (nil without one); DayCalls its total.
	Day      template.HTML
	DayCalls int64
	// Totals over the hour: what the plots add up to.
	TotalCalls, TotalErrors, TotalRefused, TotalHits int64
	// LastP50 and LastP95 are those of the latest minute with calls.
	LastP50, LastP95 string
}

func drawPlots(pts []telemetry.Point) plots {
	n := len(pts)
	calls := series{name: "calls", class: "s1", v: make([]float64, n), ok: make([]bool, n)}
	hits := series{name: "memory hits", class: "s2", v: make([]float64, n), ok: make([]bool, n)}
	p50 := series{name: "p50", class: "s1", v: make([]float64, n), ok: make([]bool, n)}
	p95 := series{name: "p95", class: "s2", v: make([]float64, n), ok: make([]bool, n)}
	errs := series{name: "errors", class: "s3", v: make([]float64, n), ok: make([]bool, n)}
	refused := series{name: "refused", class: "s2", v: make([]float64, n), ok: make([]bool, n)}
	var out plots
	out.LastP50, out.LastP95 = "-", "-"
	for i, p := range pts {
		out.TotalCalls += p.Calls
		out.TotalErrors += p.Errors
		out.TotalRefused += p.Refused
		out.TotalHits += p.Hits
		calls.v[i], calls.ok[i] = float64(p.Calls), true
		hits.v[i], hits.ok[i] = float64(p.Hits), true
		errs.v[i], errs.ok[i] = float64(p.Errors), true
		refused.v[i], refused.ok[i] = float64(p.Refused), true
		if p.P50 > 0 {
			p50.v[i], p50.ok[i] = ms(p.P50), true
			p95.v[i], p95.ok[i] = ms(p.P95), true
			out.LastP50, out.LastP95 = short(p.P50), short(p.P95)
		}
	}
	// A minute of nothing is a point at zero for counts, and no point for latency.
	out.Calls = svgPlot("plot-calls", "Tool calls per minute, and memory hits", "", "-60m", calls, hits)
	out.Latency = svgPlot("plot-latency", "Latency p50 and p95 (ms) per minute", "ms", "-60m", p50, p95)
	out.Errors = svgPlot("plot-errors", "Errors and refusals per minute", "", "-60m", errs, refused)
	return out
}

// drawDay is the last day's plot: calls, errors and p95 latency are too
// different in scale for one axis, so calls and errors per hour.
func drawDay(pts []telemetry.Point) (template.HTML, int64) {
	n := len(pts)
	calls := series{name: "calls", class: "s1", v: make([]float64, n), ok: make([]bool, n)}
	errs := series{name: "errors", class: "s3", v: make([]float64, n), ok: make([]bool, n)}
	var total int64
	for i, p := range pts {
		total += p.Calls
		calls.v[i], calls.ok[i] = float64(p.Calls), true
		errs.v[i], errs.ok[i] = float64(p.Errors), true
	}
	return svgPlot("plot-day", "Tool calls and errors per hour, the last day", "", "-24h", calls, errs), total
}

// short writes d to about three significant digits.
func short(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return d.Round(time.Microsecond).String()
	case d < 10*time.Second:
		return d.Round(10 * time.Microsecond * time.Duration(math.Pow(10, math.Floor(math.Log10(float64(d/time.Millisecond)))))).String()
	default:
		return d.Round(100 * time.Millisecond).String()
	}
}

func ms(d time.Duration) float64 { return math.Round(float64(d.Microseconds())/10) / 100 }
