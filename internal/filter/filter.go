// Package filter compiles and runs the filter expressions of webhook
// subscriptions: CEL (github.com/google/cel-go) over the event's envelope,
// with decimal strings compared as numbers. It knows no HTTP and no store.
package filter

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/checker"
	"github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
)

// Limits of an expression.
const (
	// MaxLength bounds an expression's text, in characters.
	MaxLength = 2048
	// MaxCost bounds an expression's estimated worst-case cost (cel-go cost
	// units) at compile time, and its actual cost on each event: an
	// expression that could cost more is refused, one that does is stopped
	// and delivers nothing.
	MaxCost = 100_000
	// maxStringSize is the size the cost estimate assumes for a string of
	// the envelope: an event's payload is bounded, so none is larger.
	maxStringSize = 256 << 10
	// maxListSize is the size the cost estimate assumes for a list, a map
	// or a payload value of unknown type: what real payloads hold, not what 256 KB could.
	// An event with more costs more than its estimate, and the cost
	// limit applied at run time stops it.
	maxListSize = 1000
)

// Program is a compiled, checked expression, safe for concurrent use.
type Program struct {
	prg cel.Program
}

// Compiler compiles expressions in the one environment filters run in.
// Build it once: building the environment is the expensive part.
type Compiler struct {
	env     *cel.Env
	rewrite *cel.StaticOptimizer
}

// NewCompiler builds the environment: the envelope's fields as variables
// (id, type, api_version, date, payload) and the string comparisons
// replaced by decimal-aware ones.
func NewCompiler() (*Compiler, error) {
	env, err := cel.NewEnv(
		cel.Variable("id", cel.StringType),
		cel.Variable("type", cel.StringType),
		cel.Variable("api_version", cel.StringType),
		cel.Variable("date", cel.StringType),
		cel.Variable("payload", cel.MapType(cel.StringType, cel.DynType)),
		decimalComparisons(),
	)
	if err != nil {
		return nil, fmt.Errorf("filter environment: %w", err)
	}
	rewrite, err := cel.NewStaticOptimizer(decimalRewrite{})
	if err != nil {
		return nil, fmt.Errorf("filter environment: %w", err)
	}
	return &Compiler{env: env, rewrite: rewrite}, nil
}

// Compile parses and checks expr, which must be a bool expression whose
// estimated cost is at most MaxCost. Its error says what is wrong in the
// compiler's words, meant for the merchant who wrote expr.
func (c *Compiler) Compile(expr string) (*Program, error) {
	switch {
	case strings.TrimSpace(expr) == "":
		return nil, errors.New("the expression is empty")
	case utf8.RuneCountInString(expr) > MaxLength:
		return nil, fmt.Errorf("the expression is longer than %d characters", MaxLength)
	case !utf8.ValidString(expr) || strings.ContainsRune(expr, 0):
		return nil, errors.New("the expression must be valid UTF-8 without NUL characters")
	}
	checked, iss := c.env.Compile(expr)
	if iss.Err() != nil {
		return nil, errors.New(strings.TrimSpace(iss.Err().Error()))
	}
	ast, iss := c.rewrite.Optimize(c.env, checked)
	if iss.Err() != nil {
		return nil, errors.New(strings.TrimSpace(iss.Err().Error()))
	}
	if ast.OutputType() != cel.BoolType && ast.OutputType() != cel.DynType {
		return nil, fmt.Errorf("the expression must be true or false, not %s", ast.OutputType())
	}
	est, err := c.env.EstimateCost(ast, sizeBound{})
	if err != nil {
		return nil, fmt.Errorf("estimate the expression's cost: %w", err)
	}
	if est.Max > MaxCost {
		return nil, fmt.Errorf("the expression may cost up to %d, more than the limit of %d; simplify it (fewer loops over lists)", est.Max, MaxCost)
	}
	prg, err := c.env.Program(ast, cel.CostLimit(MaxCost), cel.EvalOptions(cel.OptOptimize))
	if err != nil {
		return nil, fmt.Errorf("the expression cannot run: %w", err)
	}
	return &Program{prg: prg}, nil
}

// envelope is the part of a delivered envelope a filter reads.
type envelope struct {
	ID         string         `json:"id"`
	Type       string         `json:"type"`
	APIVersion string         `json:"api_version"`
	Date       string         `json:"date"`
	Payload    map[string]any `json:"payload"`
}

// Event is an envelope decoded once for every filter of its fan-out.
type Event struct {
	vars map[string]any
}

// Decode reads an envelope's bytes (as stored and delivered).
func Decode(body []byte) (Event, error) {
	var e envelope
	if err := json.Unmarshal(body, &e); err != nil {
		return Event{}, fmt.Errorf("decode envelope for filters: %w", err)
	}
	if e.Payload == nil {
		e.Payload = map[string]any{}
	}
	return Event{vars: map[string]any{
		"id": e.ID, "type": e.Type, "api_version": e.APIVersion, "date": e.Date, "payload": e.Payload,
	}}, nil
}

// Match runs the program on e. Any error (a missing field, a type
// mismatch, the cost limit) is returned with false: a filter never lets an
// event through that it could not judge.
func (p *Program) Match(e Event) (bool, error) {
	out, _, err := p.prg.Eval(e.vars)
	if err != nil {
		return false, err
	}
	b, ok := out.(types.Bool)
	if !ok {
		return false, fmt.Errorf("the expression gave %s, not true or false", out.Type())
	}
	return bool(b), nil
}

// compareStrings orders two strings as decimals when both are decimal
// strings ("1250.00" > "1000"), as text otherwise (CEL's own order).
func compareStrings(a, b string) int {
	x, okx := parseDecimal(a)
	y, oky := parseDecimal(b)
	if !okx || !oky {
		return strings.Compare(a, b)
	}
	return x.compare(y)
}

// decimal is a decimal string taken apart, exactly: no floating point.
type decimal struct {
	negative bool
	// whole has no leading zeros, fraction no trailing ones; both are
	// empty for zero.
	whole, fraction string
}

// parseDecimal reads a decimal as the API writes amounts: an optional
// minus, digits, and optionally a point and more digits.
func parseDecimal(s string) (decimal, bool) {
	var d decimal
	if strings.HasPrefix(s, "-") {
		d.negative, s = true, s[1:]
	}
	whole, fraction, hasPoint := strings.Cut(s, ".")
	if !allDigits(whole) || (hasPoint && !allDigits(fraction)) {
		return decimal{}, false
	}
	d.whole, d.fraction = strings.TrimLeft(whole, "0"), strings.TrimRight(fraction, "0")
	if d.whole == "" && d.fraction == "" {
		d.negative = false // -0 is 0
	}
	return d, true
}

func allDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// compare orders d and e by value.
func (d decimal) compare(e decimal) int {
	if d.negative != e.negative {
		if d.negative {
			return -1
		}
		return 1
	}
	c := len(d.whole) - len(e.whole) // more digits, larger magnitude
	if c == 0 {
		c = strings.Compare(d.whole, e.whole)
	}
	if c == 0 {
		// Without trailing zeros, text order of the fraction digits is
		// their order by value: "05" < "5" < "51".
		c = strings.Compare(d.fraction, e.fraction)
	}
	if d.negative {
		c = -c
	}
	return max(-1, min(1, c))
}

// comparisons maps CEL's ordering operators to the functions that
// replace them. Their names cannot be written in an expression (they are
// not identifiers), so a merchant only reaches them through the operators.
var comparisons = map[string]struct {
	name  string
	holds func(int) bool
}{
	"_<_":  {"@decimal_less", func(c int) bool { return c < 0 }},
	"_<=_": {"@decimal_less_equals", func(c int) bool { return c <= 0 }},
	"_>_":  {"@decimal_greater", func(c int) bool { return c > 0 }},
	"_>=_": {"@decimal_greater_equals", func(c int) bool { return c >= 0 }},
}

// decimalComparisons declares the replacements of <, <=, > and >=: two
// strings compare with compareStrings, anything else as CEL compares it.
// (CEL's own operators cannot be given another implementation for
// strings: they have one binding for every type.)
func decimalComparisons() cel.EnvOption {
	var opts []cel.EnvOption
	for _, c := range comparisons {
		holds := c.holds
		opts = append(opts, cel.Function(c.name,
			cel.Overload(c.name+"_dyn", []*cel.Type{cel.DynType, cel.DynType}, cel.BoolType),
			cel.SingletonBinaryBinding(func(l, r ref.Val) ref.Val {
				if a, ok := l.(types.String); ok {
					if b, ok := r.(types.String); ok {
						return types.Bool(holds(compareStrings(string(a), string(b))))
					}
				}
				cmp, ok := l.(traits.Comparer)
				if !ok {
					return types.MaybeNoSuchOverloadErr(l)
				}
				out := cmp.Compare(r)
				n, ok := out.(types.Int)
				if !ok {
					return out // an error: the two cannot be compared
				}
				return types.Bool(holds(int(n)))
			})))
	}
	return cel.Lib(decimalLib{opts: opts})
}

// decimalLib carries the comparisons as one cel.Library.
type decimalLib struct{ opts []cel.EnvOption }

func (l decimalLib) CompileOptions() []cel.EnvOption { return l.opts }

func (decimalLib) ProgramOptions() []cel.ProgramOption { return nil }

// decimalRewrite turns every ordering operator of a checked expression
// into its decimal-aware replacement.
type decimalRewrite struct{}

func (decimalRewrite) Optimize(ctx *cel.OptimizerContext, a *ast.AST) *ast.AST {
	for fn, c := range comparisons {
		for _, call := range ast.MatchDescendants(ast.NavigateAST(a), ast.FunctionMatcher(fn)) {
			ctx.UpdateExpr(call, ctx.NewCall(c.name, call.AsCall().Args()...))
		}
	}
	return a
}

// sizeBound tells the cost estimator how large an envelope value can be.
type sizeBound struct{}

func (sizeBound) EstimateSize(n checker.AstNode) *checker.SizeEstimate {
	if n.Type().Kind() == types.StringKind {
		return &checker.SizeEstimate{Min: 0, Max: maxStringSize}
	}
	// A list, a map, or a payload value of unknown type.
	return &checker.SizeEstimate{Min: 0, Max: maxListSize}
}

func (sizeBound) EstimateCallCost(string, string, *checker.AstNode, []checker.AstNode) *checker.CallEstimate {
	return nil
}
