package samples

import (
	_ "embed"
	"encoding/json"
)

// The doc-kg sample dataset, dockg_data.json: read-only, decoded afresh for
// each server by newDocDataset so the package holds no shared mutable values.
//
// Facts the tests rely on:
//   - source_app capture has documents but no generated graph: every scope
//     on it answers graph_unavailable (not_generated).
//   - caller_app external-app is not authorized on echo (meeting
//     transcripts): graph_unavailable (not_authorized) when it asks for it.
//   - doc-onboarding-access contains a credential-like line that must come
//     out redacted.

type sourceApp struct {
	ID          string   `json:"id"`
	Title       string   `json:"title"`
	Generated   bool     `json:"generated"`           // false: the Nexus graph of this source was never generated
	DeniedTo    []string `json:"denied_to,omitempty"` // caller apps not authorized on this source
	GeneratedAt string   `json:"generated_at,omitempty"`
}

type workspaceInfo struct {
	ID        string        `json:"id"`
	SourceApp string        `json:"source_app"`
	Title     string        `json:"title"`
	Projects  []projectInfo `json:"projects"`
}

type projectInfo struct {
	ID    string `json:"id"`
	Title string `json:"title"`
}

type document struct {
	ID        string   `json:"id"`
	Kind      string   `json:"kind"`
	Title     string   `json:"title"`
	Body      string   `json:"body"`
	SourceApp string   `json:"source_app"`
	Workspace string   `json:"workspace"`
	Proj      string   `json:"project"`
	Tags      []string `json:"tags,omitempty"`
	UpdatedAt string   `json:"updated_at"`
}

type entity struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	Kind string `json:"kind"`
}

type docRelation struct {
	From string `json:"from"`
	To   string `json:"to"`
	Type string `json:"type"`
}

type docDataset struct {
	sources    []sourceApp
	workspaces []workspaceInfo
	docs       []document
	entities   []entity
	relations  []docRelation
}

// docData is dockg_data.json: the sources, workspaces, documents, entities and
// relations, as the server serves them.
//
//go:embed dockg_data.json
var docData string

// newDocDataset decodes the dataset. The file is part of the binary, so a
// decoding error is a bug in it, which the tests catch.
func newDocDataset() *docDataset {
	var f struct {
		Sources    []sourceApp     `json:"sources"`
		Workspaces []workspaceInfo `json:"workspaces"`
		Documents  []document      `json:"documents"`
		Entities   []entity        `json:"entities"`
		Relations  []docRelation   `json:"relations"`
	}
	if err := json.Unmarshal([]byte(docData), &f); err != nil {
		panic("samples: dockg_data.json: " + err.Error())
	}
	return &docDataset{sources: f.Sources, workspaces: f.Workspaces, docs: f.Documents, entities: f.Entities, relations: f.Relations}
}
