package samples

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// maxAheadUsable is how many commits a local HEAD may be ahead of the graph
// and still get stale_but_usable (when those commits touch no file with a
// finding).
const maxAheadUsable = 3

var hexCommit = regexp.MustCompile(`^[0-9a-f]{7,40}$`)

type localGitArgs struct {
	selectorArgs
	LocalHead       string   `json:"local_head"`
	LocalDirty      bool     `json:"local_dirty"`
	LocalDirtyFiles []string `json:"local_dirty_files"`
	LocalPath       string   `json:"local_path"`
}

// allowedLocalPath checks a client-supplied local path: only over local
// stdio, absolute, and inside one of the allow-listed roots after cleaning
// and, when it exists, after resolving symlinks, so neither ".." nor a link
// can escape a root.
func allowedLocalPath(opts Options, p string) (string, error) {
	if opts.Remote {
		return "", errors.New("local_path is only accepted by a local stdio server; over remote HTTP select the graph with repository + branch")
	}
	if len(opts.LocalRepoRoots) == 0 {
		return "", fmt.Errorf("no local repository root is allow-listed (%s is empty)", EnvLocalRepoRoots)
	}
	if !filepath.IsAbs(p) {
		return "", errors.New("local_path must be absolute")
	}
	clean := filepath.Clean(p)
	if !underAnyRoot(opts.LocalRepoRoots, clean) {
		return "", fmt.Errorf("local_path is not under an allow-listed root (%s)", EnvLocalRepoRoots)
	}
	if resolved, err := filepath.EvalSymlinks(clean); err == nil {
		var roots []string
		for _, r := range opts.LocalRepoRoots {
			if rr, err := filepath.EvalSymlinks(r); err == nil {
				roots = append(roots, rr)
			}
		}
		if !underAnyRoot(roots, resolved) {
			return "", fmt.Errorf("local_path resolves outside the allow-listed roots (%s)", EnvLocalRepoRoots)
		}
		clean = resolved
	}
	return clean, nil
}

func underAnyRoot(roots []string, p string) bool {
	for _, root := range roots {
		rel, err := filepath.Rel(filepath.Clean(root), p)
		if err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel) {
			return true
		}
	}
	return false
}

// readGitHead reads the commit of <dir>/.git/HEAD, following one symbolic
// ref to a loose ref file. It returns "" when the commit cannot be told
// this way (no .git, packed refs, worktree files): the head is then unknown.
func readGitHead(dir string) string {
	b, err := os.ReadFile(filepath.Join(dir, ".git", "HEAD"))
	if err != nil {
		return ""
	}
	head := strings.TrimSpace(string(b))
	if ref, isRef := strings.CutPrefix(head, "ref: "); isRef {
		if !strings.HasPrefix(ref, "refs/") || strings.Contains(ref, "..") {
			return ""
		}
		b, err = os.ReadFile(filepath.Join(dir, ".git", filepath.FromSlash(ref)))
		if err != nil {
			return ""
		}
		head = strings.TrimSpace(string(b))
	}
	if !hexCommit.MatchString(head) {
		return ""
	}
	return head
}

func sameCommit(a, b string) bool {
	if len(a) < 7 || len(b) < 7 {
		return false
	}
	return strings.HasPrefix(a, b) || strings.HasPrefix(b, a)
}

func (k *codeKG) compareWithLocalGit(_ context.Context, a *localGitArgs) answer {
	if a.LocalHead != "" && !hexCommit.MatchString(strings.ToLower(a.LocalHead)) {
		return failure("refused", "local_head must be 7 to 40 hexadecimal digits", nil)
	}
	localHead, source := strings.ToLower(a.LocalHead), "local_head"
	var reasons []string
	verdictFloor := "" // unsafe_for_patch_decision when the inputs disagree
	if a.LocalPath != "" {
		dir, err := allowedLocalPath(k.opts, a.LocalPath)
		if err != nil {
			return failure("refused", err.Error(), map[string]any{"refusal": "local_path_not_allowed"})
		}
		fromDisk := readGitHead(dir)
		switch {
		case fromDisk == "":
			reasons = append(reasons, "could not read a commit from local_path/.git/HEAD")
		case localHead == "":
			localHead, source = fromDisk, "local_path"
		case !sameCommit(localHead, fromDisk):
			verdictFloor = "unsafe_for_patch_decision"
			reasons = append(reasons, fmt.Sprintf("local_head %s disagrees with local_path HEAD %s: the situation is ambiguous", localHead, fromDisk))
		}
	}
	run, b, fail := k.resolve(a.selectorArgs)
	if fail != nil {
		return *fail
	}
	withFindings := map[string]bool{}
	for _, f := range run.Findings {
		withFindings[f.Path] = true
	}
	var dirtyCrossing []string
	for _, p := range a.LocalDirtyFiles {
		if withFindings[filepath.ToSlash(filepath.Clean(p))] && !slices.Contains(dirtyCrossing, p) {
			dirtyCrossing = append(dirtyCrossing, p)
		}
	}
	dirty := a.LocalDirty || len(a.LocalDirtyFiles) > 0

	verdict := "stale"
	switch {
	case verdictFloor != "":
		verdict = verdictFloor
	case len(dirtyCrossing) > 0:
		verdict = "unsafe_for_patch_decision"
		reasons = append(reasons, "uncommitted changes touch files that carry findings: "+strings.Join(dirtyCrossing, ", "))
	case localHead == "":
		source = "unknown"
		reasons = append(reasons, "the local HEAD is unknown: comparison impossible")
	case sameCommit(localHead, run.Commit):
		verdict = "fresh"
		if dirty {
			verdict = "stale_but_usable"
			reasons = append(reasons, "HEAD matches the graph; the worktree is dirty but no dirty file carries a finding")
			if len(a.LocalDirtyFiles) == 0 {
				reasons = append(reasons, "local_dirty_files not given: pass them to rule out unsafe_for_patch_decision")
			}
		} else {
			reasons = append(reasons, "HEAD matches the graph commit and the worktree is clean")
		}
	default:
		verdict, reasons = aheadVerdict(b, run, localHead, withFindings, dirty, reasons)
	}
	return ok(map[string]any{
		"verdict": verdict, "patch_allowed": verdict == "fresh",
		"graph_id": run.ID, "graph_commit": run.Commit, "local_head": localHead, "local_head_source": source,
		"local_dirty": dirty, "dirty_files_with_findings": nonNil(dirtyCrossing), "reasons": nonNil(reasons),
	})
}

// aheadVerdict judges a local HEAD that differs from the graph's commit,
// using the branch history the Nexus API knows.
func aheadVerdict(b *branchInfo, run *graphRun, head string, withFindings map[string]bool, dirty bool, reasons []string) (string, []string) {
	idxHead := slices.IndexFunc(b.History, func(c commit) bool { return sameCommit(c.SHA, head) })
	idxGraph := slices.IndexFunc(b.History, func(c commit) bool { return c.SHA == run.Commit })
	if idxHead < 0 || idxGraph < 0 {
		return "stale", append(reasons, "the local HEAD is not a known commit of "+b.Branch+": comparison impossible")
	}
	if idxHead > idxGraph {
		return "stale", append(reasons, fmt.Sprintf("the local HEAD is %d commit(s) behind the graph", idxHead-idxGraph))
	}
	ahead := idxGraph - idxHead
	var crossing []string
	for _, c := range b.History[idxHead:idxGraph] {
		for _, f := range c.Files {
			if withFindings[f] && !slices.Contains(crossing, f) {
				crossing = append(crossing, f)
			}
		}
	}
	switch {
	case len(crossing) > 0:
		return "stale", append(reasons, fmt.Sprintf("the local HEAD is %d commit(s) ahead and they change files with findings: %s", ahead, strings.Join(crossing, ", ")))
	case ahead > maxAheadUsable:
		return "stale", append(reasons, fmt.Sprintf("the local HEAD is %d commits ahead (more than %d)", ahead, maxAheadUsable))
	}
	reasons = append(reasons, fmt.Sprintf("the local HEAD is %d commit(s) ahead and they touch no file with findings", ahead))
	if dirty {
		reasons = append(reasons, "the worktree is dirty but no dirty file carries a finding")
	}
	return "stale_but_usable", reasons
}
