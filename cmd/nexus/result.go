package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// printResult writes a tool result for a person: text content as text, structured
// content pretty-printed when it adds to the text (not when the text already says
// every value of it, as JSON or in words: the data once),
// other content named with its type and size. Scripts get the raw result: --json,
// or any stdout that is not a terminal.
func printResult(w io.Writer, raw json.RawMessage) error {
	var res struct {
		Content []struct {
			Type     string `json:"type"`
			Text     string `json:"text"`
			MimeType string `json:"mimeType"`
			Data     string `json:"data"`
			Resource *struct {
				URI  string `json:"uri"`
				Text string `json:"text"`
			} `json:"resource"`
			URI string `json:"uri"`
		} `json:"content"`
		Structured json.RawMessage `json:"structuredContent"`
		IsError    bool            `json:"isError"`
	}
	if err := json.Unmarshal(raw, &res); err != nil {
		return fmt.Errorf("decoding the result: %w", err)
	}
	var out, text strings.Builder
	if res.IsError {
		out.WriteString("tool error:\n")
	}
	for _, c := range res.Content {
		switch {
		case c.Type == "text" && sameJSON(c.Text, res.Structured):
			continue // printed below, readably
		case c.Type == "text":
			out.WriteString(strings.TrimRight(c.Text, "\n") + "\n")
			text.WriteString(c.Text + "\n")
		case c.Type == "resource" && c.Resource != nil && c.Resource.Text != "":
			fmt.Fprintf(&out, "[resource %s]\n%s\n", c.Resource.URI, strings.TrimRight(c.Resource.Text, "\n"))
		case c.Type == "resource" && c.Resource != nil:
			fmt.Fprintf(&out, "[resource %s]\n", c.Resource.URI)
		case c.Type == "resource_link":
			fmt.Fprintf(&out, "[link %s]\n", c.URI)
		default:
			fmt.Fprintf(&out, "[%s %s, %d bytes base64; --json shows it]\n", c.Type, c.MimeType, len(c.Data))
		}
	}
	if len(res.Structured) > 0 && !bytes.Equal(bytes.TrimSpace(res.Structured), []byte("null")) && !saidIn(res.Structured, text.String()) {
		var pretty bytes.Buffer
		if err := json.Indent(&pretty, res.Structured, "", "  "); err != nil {
			return fmt.Errorf("decoding the structured content: %w", err)
		}
		out.Write(pretty.Bytes())
		out.WriteString("\n")
	}
	_, err := io.WriteString(w, out.String())
	return err
}

// sameJSON reports whether text is the structured content written as JSON.
func sameJSON(text string, structured json.RawMessage) bool {
	if len(structured) == 0 {
		return false
	}
	var a, b any
	if json.Unmarshal([]byte(text), &a) != nil || json.Unmarshal(structured, &b) != nil {
		return false
	}
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return bytes.Equal(ja, jb)
}

// saidIn reports whether text already holds every value of the structured content:
// a tool's text is most often its structured result, rendered.
func saidIn(structured json.RawMessage, text string) bool {
	var v any
	if text == "" || json.Unmarshal(structured, &v) != nil {
		return false
	}
	all := true
	var walk func(any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			for _, e := range x {
				walk(e)
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		case nil:
		case string:
			all = all && strings.Contains(text, x)
		default:
			b, _ := json.Marshal(x)
			all = all && strings.Contains(text, string(b))
		}
	}
	walk(v)
	return all
}
