// Package benchplot draws the cost curves of the benchmarks as small SVG line
// plots, kept beside the docs that show them (docs/img). It is a test helper:
// nothing of the gateway imports it.
package benchplot

import (
	"fmt"
	"html"
	"math"
	"os"
	"path/filepath"
	"strings"
)

// Series is one line: its points, in order of X.
type Series struct {
	Name string
	X, Y []float64
}

// Plot is a line plot with one or more series. LogX and LogY draw an axis in
// decades (every value must then be above 0).
type Plot struct {
	Title, XLabel, YLabel string
	LogX, LogY            bool
	Series                []Series
}

const (
	width, height                       = 560, 340
	left, right, top, bottom            = 64, 16, 36, 46
	plotW, plotH                        = width - left - right, height - top - bottom
	fontAttr                            = `font-family="sans-serif" font-size="11"`
	axisColor, gridColor, textColor     = "#444", "#ddd", "#222"
	pointRadius                         = 3
	legendLine, legendGap, legendHeight = 18, 6, 14
)

var colors = []string{"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b"}

// WriteFile writes the plot's SVG to path, creating its directory.
func (p Plot) WriteFile(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, p.SVG(), 0o644)
}

// SVG is the plot as a standalone SVG document.
func (p Plot) SVG() []byte {
	var xs, ys []float64
	for _, s := range p.Series {
		xs, ys = append(xs, s.X...), append(ys, s.Y...)
	}
	xa := newAxis(xs, p.LogX, false)
	ya := newAxis(ys, p.LogY, true)
	px := func(v float64) float64 { return left + xa.pos(v)*plotW }
	py := func(v float64) float64 { return top + (1-ya.pos(v))*plotH }

	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d">`+"\n", width, height, width, height)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="#fff"/>`+"\n", width, height)
	fmt.Fprintf(&b, `<text x="%d" y="20" font-family="sans-serif" font-size="13" font-weight="bold" fill="%s">%s</text>`+"\n", left, textColor, html.EscapeString(p.Title))
	for _, v := range ya.ticks {
		y := py(v)
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="%s"/>`+"\n", left, y, left+plotW, y, gridColor)
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" %s fill="%s" text-anchor="end">%s</text>`+"\n", left-6, y+4, fontAttr, textColor, label(v, ya.log))
	}
	for _, v := range xa.ticks {
		x := px(v)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="%s"/>`+"\n", x, top, x, top+plotH, gridColor)
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" %s fill="%s" text-anchor="middle">%s</text>`+"\n", x, top+plotH+16, fontAttr, textColor, label(v, xa.log))
	}
	fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="%s"/>`+"\n", left, top, plotW, plotH, axisColor)
	fmt.Fprintf(&b, `<text x="%d" y="%d" %s fill="%s" text-anchor="middle">%s</text>`+"\n", left+plotW/2, height-8, fontAttr, textColor, html.EscapeString(p.XLabel))
	fmt.Fprintf(&b, `<text transform="translate(14 %d) rotate(-90)" %s fill="%s" text-anchor="middle">%s</text>`+"\n", top+plotH/2, fontAttr, textColor, html.EscapeString(p.YLabel))
	for i, s := range p.Series {
		c := colors[i%len(colors)]
		var pts []string
		for j := range min(len(s.X), len(s.Y)) {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", px(s.X[j]), py(s.Y[j])))
		}
		fmt.Fprintf(&b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="2"/>`+"\n", strings.Join(pts, " "), c)
		for _, pt := range pts {
			x, y, _ := strings.Cut(pt, ",")
			fmt.Fprintf(&b, `<circle cx="%s" cy="%s" r="%d" fill="%s"><title>%s</title></circle>`+"\n", x, y, pointRadius, c, html.EscapeString(s.Name))
		}
		ly := top + 8 + i*(legendHeight+legendGap/2)
		fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2"/>`+"\n", left+10, ly, left+10+legendLine, ly, c)
		fmt.Fprintf(&b, `<text x="%d" y="%d" %s fill="%s">%s</text>`+"\n", left+14+legendLine, ly+4, fontAttr, textColor, html.EscapeString(s.Name))
	}
	b.WriteString("</svg>\n")
	return []byte(b.String())
}

// axis maps values to [0, 1] along a linear or decade scale.
type axis struct {
	lo, hi float64
	log    bool
	ticks  []float64
}

// newAxis spans vs; a linear axis that starts at zero when fromZero holds.
func newAxis(vs []float64, log, fromZero bool) axis {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, v := range vs {
		lo, hi = min(lo, v), max(hi, v)
	}
	if len(vs) == 0 {
		lo, hi = 1, 10
	}
	if log {
		lo, hi = math.Pow(10, math.Floor(math.Log10(lo))), math.Pow(10, math.Ceil(math.Log10(hi)))
		if hi <= lo {
			hi = lo * 10
		}
		a := axis{lo: lo, hi: hi, log: true}
		for v := lo; v <= hi*1.0001; v *= 10 {
			a.ticks = append(a.ticks, v)
		}
		return a
	}
	if fromZero {
		lo = min(lo, 0)
	}
	if hi <= lo {
		hi = lo + 1
	}
	step := niceStep((hi - lo) / 5)
	lo, hi = math.Floor(lo/step)*step, math.Ceil(hi/step)*step
	a := axis{lo: lo, hi: hi}
	for v := lo; v <= hi+step/2; v += step {
		a.ticks = append(a.ticks, v)
	}
	return a
}

func (a axis) pos(v float64) float64 {
	if a.log {
		return (math.Log10(v) - math.Log10(a.lo)) / (math.Log10(a.hi) - math.Log10(a.lo))
	}
	return (v - a.lo) / (a.hi - a.lo)
}

// niceStep is the step of 1, 2 or 5 times a power of ten nearest above raw.
func niceStep(raw float64) float64 {
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= raw {
			return m * p
		}
	}
	return 10 * p
}

// label writes a tick's value briefly: 2.5, 40, 1500, 10k; on a decade
// axis also 1k, 1M.
func label(v float64, decades bool) string {
	short := 1e4
	if decades {
		short = 1e3
	}
	switch a := math.Abs(v); {
	case a >= 1e6 && math.Mod(v, 1e6) == 0:
		return fmt.Sprintf("%gM", v/1e6)
	case a >= short && math.Mod(v, 1e3) == 0:
		return fmt.Sprintf("%gk", v/1e3)
	default:
		return fmt.Sprintf("%g", math.Round(v*1000)/1000)
	}
}
