// Command structure prints the figures a review of the code's shape reads: each
// package with its files and lines (tests apart), the fields and methods of named
// types, and, for named packages, how their files refer to one another.
//
//	go run ./tests/structure -type aggregation.Gateway -files aggregation ./...
//
// How the file figures are counted: file A refers to file B (A != B, both
// non-test files of one package) when an identifier in A resolves to something
// declared at the top level of B: a function, variable, constant or type, a
// method, or a field of a struct type declared in B. Each ordered pair (A, B)
// counts once, however many references it stands for. A package's files can be
// laid in layers (each file referring only to files below it) exactly when this
// graph has no cycle; a reference whose two files lie on one cycle (one strongly
// connected component) can be laid in no layering, and is counted as "in a
// cycle". Fewer references must point upward in the best layering: the figure
// "upward" is the count under the order the Eades-Lin-Smyth heuristic finds
// (a near-minimal feedback arc set; no better order is known to exist, none is
// proved not to).
package main

import (
	"flag"
	"fmt"
	"go/ast"
	"go/token"
	"go/types"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/tools/go/packages"
)

func main() {
	var typeNames, filePkgs string
	flag.StringVar(&typeNames, "type", "", "comma-separated pkg.Type whose fields and methods to count (pkg is the package's last path element)")
	flag.StringVar(&filePkgs, "files", "", "comma-separated packages (last path element) whose file-to-file references to count")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: structure [-type pkg.Type,...] [-files pkg,...] PATTERN...")
		flag.PrintDefaults()
	}
	flag.Parse()
	patterns := flag.Args()
	if len(patterns) == 0 {
		patterns = []string{"./..."}
	}
	cfg := &packages.Config{Mode: packages.NeedName | packages.NeedFiles | packages.NeedSyntax | packages.NeedTypes | packages.NeedTypesInfo}
	pkgs, err := packages.Load(cfg, patterns...)
	if err != nil {
		fmt.Fprintln(os.Stderr, "structure:", err)
		os.Exit(1)
	}
	if packages.PrintErrors(pkgs) > 0 {
		os.Exit(1)
	}
	slices.SortFunc(pkgs, func(a, b *packages.Package) int { return strings.Compare(a.PkgPath, b.PkgPath) })
	printPackages(pkgs)
	for _, name := range split(typeNames) {
		pkgName, typ, ok := strings.Cut(name, ".")
		if !ok {
			fmt.Fprintf(os.Stderr, "structure: -type %s: want pkg.Type\n", name)
			os.Exit(2)
		}
		p := byName(pkgs, pkgName)
		if p == nil {
			fmt.Fprintf(os.Stderr, "structure: no package %s among those loaded\n", pkgName)
			os.Exit(2)
		}
		if err := printType(p, typ); err != nil {
			fmt.Fprintln(os.Stderr, "structure:", err)
			os.Exit(2)
		}
	}
	for _, name := range split(filePkgs) {
		p := byName(pkgs, name)
		if p == nil {
			fmt.Fprintf(os.Stderr, "structure: no package %s among those loaded\n", name)
			os.Exit(2)
		}
		printFiles(p)
	}
}

func split(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

func byName(pkgs []*packages.Package, name string) *packages.Package {
	for _, p := range pkgs {
		if p.Name == name || filepath.Base(p.PkgPath) == name {
			return p
		}
	}
	return nil
}

// lines is the number of lines of f, as wc -l counts them.
func lines(fset *token.FileSet, f *ast.File) int {
	return fset.File(f.Pos()).LineCount()
}

func printPackages(pkgs []*packages.Package) {
	fmt.Println("package\tfiles\tlines")
	total := 0
	for _, p := range pkgs {
		n := 0
		for _, f := range p.Syntax {
			n += lines(p.Fset, f)
		}
		total += n
		fmt.Printf("%s\t%d\t%d\n", p.PkgPath, len(p.Syntax), n)
	}
	fmt.Printf("total\t\t%d\n\n", total)
}

// printType counts a named type's fields, its methods (on the type and its
// pointer) and the files they are declared in.
func printType(p *packages.Package, name string) error {
	obj, _ := p.Types.Scope().Lookup(name).(*types.TypeName)
	if obj == nil {
		return fmt.Errorf("no type %s in %s", name, p.PkgPath)
	}
	named := obj.Type().(*types.Named)
	fields := 0
	if st, ok := named.Underlying().(*types.Struct); ok {
		fields = st.NumFields()
	}
	files := map[string]bool{}
	for i := range named.NumMethods() {
		files[filepath.Base(p.Fset.Position(named.Method(i).Pos()).Filename)] = true
	}
	fmt.Printf("%s.%s: %d fields, %d methods in %d files\n\n", p.Name, name, fields, named.NumMethods(), len(files))
	return nil
}

// printFiles counts the package's file-to-file references and those that lie on
// a cycle (see the package comment).
func printFiles(p *packages.Package) {
	fileOf := func(pos token.Pos) string { return filepath.Base(p.Fset.Position(pos).Filename) }
	declared := map[types.Object]string{} // top-level objects, methods and fields, by file
	var names []string
	for _, f := range p.Syntax {
		file := fileOf(f.Pos())
		names = append(names, file)
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				declared[p.TypesInfo.Defs[d.Name]] = file
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.ValueSpec:
						for _, n := range s.Names {
							declared[p.TypesInfo.Defs[n]] = file
						}
					case *ast.TypeSpec:
						declared[p.TypesInfo.Defs[s.Name]] = file
						ast.Inspect(s.Type, func(n ast.Node) bool {
							if fl, ok := n.(*ast.Field); ok {
								for _, fn := range fl.Names {
									declared[p.TypesInfo.Defs[fn]] = file
								}
							}
							return true
						})
					}
				}
			}
		}
	}
	edges := map[string]map[string]bool{}
	for _, f := range p.Syntax {
		from := fileOf(f.Pos())
		ast.Inspect(f, func(n ast.Node) bool {
			id, ok := n.(*ast.Ident)
			if !ok {
				return true
			}
			to, ok := declared[p.TypesInfo.Uses[id]]
			if ok && to != from {
				if edges[from] == nil {
					edges[from] = map[string]bool{}
				}
				edges[from][to] = true
			}
			return true
		})
	}
	total := 0
	for _, tos := range edges {
		total += len(tos)
	}
	cyclic, biggest := inCycles(names, edges)
	pct := 100 * float64(cyclic) / float64(max(total, 1))
	up := upward(names, edges)
	fmt.Printf("%s: %d files, %d file-to-file references, %d (%.0f%%) in a cycle, the largest joining %d files; %d (%.0f%%) upward in the best layering found\n",
		p.PkgPath, len(names), total, cyclic, pct, biggest, up, 100*float64(up)/float64(max(total, 1)))
}

// upward orders the files bottom to top with the Eades-Lin-Smyth heuristic and
// counts the references that point from a file to one above it.
func upward(nodes []string, edges map[string]map[string]bool) int {
	in, out := map[string]map[string]bool{}, map[string]map[string]bool{}
	for _, v := range nodes {
		in[v], out[v] = map[string]bool{}, map[string]bool{}
	}
	for from, tos := range edges {
		for to := range tos {
			out[from][to], in[to][from] = true, true
		}
	}
	remove := func(v string) {
		for w := range out[v] {
			delete(in[w], v)
		}
		for w := range in[v] {
			delete(out[w], v)
		}
		delete(in, v)
		delete(out, v)
	}
	// A file that refers to nothing left goes to the bottom; one nothing left
	// refers to, to the top; otherwise the file most referred to beyond what
	// it refers to goes next to the bottom.
	var bottom, top []string
	for len(in) > 0 {
		left := make([]string, 0, len(in))
		for v := range in {
			left = append(left, v)
		}
		slices.Sort(left)
		moved := false
		for _, v := range left {
			switch {
			case len(out[v]) == 0:
				bottom = append(bottom, v)
			case len(in[v]) == 0:
				top = append(top, v)
			default:
				continue
			}
			remove(v)
			moved = true
		}
		if moved {
			continue
		}
		best := left[0]
		for _, v := range left {
			if len(in[v])-len(out[v]) > len(in[best])-len(out[best]) {
				best = v
			}
		}
		bottom = append(bottom, best)
		remove(best)
	}
	slices.Reverse(top)
	order := map[string]int{}
	for i, v := range append(bottom, top...) {
		order[v] = i
	}
	n := 0
	for from, tos := range edges {
		for to := range tos {
			if order[to] > order[from] {
				n++
			}
		}
	}
	return n
}

// inCycles counts the references whose two files lie on one cycle, and the
// files of the largest cycle.
func inCycles(nodes []string, edges map[string]map[string]bool) (refs, largest int) {
	comp := components(nodes, edges)
	for from, tos := range edges {
		for to := range tos {
			if comp[from] == comp[to] {
				refs++
			}
		}
	}
	size := map[int]int{}
	for _, c := range comp {
		size[c]++
		largest = max(largest, size[c])
	}
	return refs, largest
}

// components numbers the strongly connected components of the graph (Tarjan's
// algorithm): two files share a number when each reaches the other.
func components(nodes []string, edges map[string]map[string]bool) map[string]int {
	slices.Sort(nodes)
	index, low := map[string]int{}, map[string]int{}
	onStack := map[string]bool{}
	var stack []string
	comp := map[string]int{}
	next, ncomp := 0, 0
	var visit func(v string)
	visit = func(v string) {
		index[v], low[v] = next, next
		next++
		stack = append(stack, v)
		onStack[v] = true
		tos := make([]string, 0, len(edges[v]))
		for w := range edges[v] {
			tos = append(tos, w)
		}
		slices.Sort(tos)
		for _, w := range tos {
			if _, seen := index[w]; !seen {
				visit(w)
				low[v] = min(low[v], low[w])
			} else if onStack[w] {
				low[v] = min(low[v], index[w])
			}
		}
		if low[v] == index[v] {
			for {
				w := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				onStack[w] = false
				comp[w] = ncomp
				if w == v {
					break
				}
			}
			ncomp++
		}
	}
	for _, v := range nodes {
		if _, seen := index[v]; !seen {
			visit(v)
		}
	}
	return comp
}
