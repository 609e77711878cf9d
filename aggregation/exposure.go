package aggregation

// redactText removes secret values from text a person reads: a child's stderr,
// its stray stdout lines, its errors (Options.RedactText).
func (g *Gateway) redactText(s string) string { return g.text(s) }
