package transform

import (
	"context"
	_ "embed"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/webhookd/webhookd/internal/clock"
)

// quickJS is QuickJS with engine/shim.c, compiled to WebAssembly by
// engine/build.sh.
//
//go:embed engine/quickjs.wasm
var quickJS []byte

// What a call of the module ended with (engine/shim.c's WH_*).
const (
	statusOK        = 0
	statusThrown    = 1
	statusNoHandler = 2
	statusUndefined = 3
	statusTooLarge  = 4
	statusNoMemory  = 5
)

// stackBytes is the engine's stack, set when the module is linked
// (engine/build.sh). QuickJS stops a recursion (of the script, or of its
// parser, JSON.parse or JSON.stringify) when it has used stackCheckBytes
// of it, about 700 calls of the script's functions: each such call also
// takes about 10 KiB of wazero's own stack, which is Go memory, so this
// check is what bounds it (to 8 MiB; docs/transformations.md).
const (
	stackBytes      = 1 << 20
	stackCheckBytes = 192 << 10
)

// Why a call was stopped from outside (the cause of its context).
var (
	errCPUTime  = errors.New("cpu time limit")
	errWallTime = errors.New("wall time limit")
)

// engine runs the module: one compiled copy, and a fresh instance of it
// for every call, whose memory is gone when the call ends.
type engine struct {
	runtime  wazero.Runtime
	compiled wazero.CompiledModule
	limits   Limits
	// clock is the engine's one clock: what the script's clocks read, and
	// the wall time a call is charged where the thread's CPU clock cannot
	// be read.
	clock clock.Clock
}

// newEngine compiles the module once (about half a second).
func newEngine(ctx context.Context, l Limits, clk clock.Clock) (*engine, error) {
	cfg := wazero.NewRuntimeConfig().
		WithMemoryLimitPages(uint32(l.MemoryPerCall / pageBytes)).
		WithCloseOnContextDone(true)
	r := wazero.NewRuntimeWithConfig(ctx, cfg)
	if err := instantiateHost(ctx, r, clk); err != nil {
		r.Close(ctx)
		return nil, err
	}
	compiled, err := r.CompileModule(ctx, quickJS)
	if err != nil {
		r.Close(ctx)
		return nil, fmt.Errorf("transform: compile the engine: %w", err)
	}
	return &engine{runtime: r, compiled: compiled, limits: l, clock: clk}, nil
}

// close releases the compiled module.
func (e *engine) close(ctx context.Context) error { return e.runtime.Close(ctx) }

// errnoBadf is WASI's EBADF: there is no file to write, seek or close.
const errnoBadf = 8

// instantiateHost gives the module the four WASI functions its C library
// imports, and nothing more: the clock (Date.now reads the injected one),
// and files that do not exist. There is no file system, no socket, no
// environment behind them.
func instantiateHost(ctx context.Context, r wazero.Runtime, clk clock.Clock) error {
	started := clk.Now()
	badf := api.GoModuleFunc(func(_ context.Context, _ api.Module, stack []uint64) {
		stack[0] = errnoBadf
	})
	i32, i64 := api.ValueTypeI32, api.ValueTypeI64
	_, err := r.NewHostModuleBuilder("wasi_snapshot_preview1").
		NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(func(_ context.Context, m api.Module, stack []uint64) {
		var now uint64
		if api.DecodeU32(stack[0]) == 0 { // CLOCK_REALTIME
			now = uint64(clk.Now().UnixNano())
		} else { // the monotonic and CPU clocks
			now = uint64(clk.Now().Sub(started))
		}
		var b [8]byte
		binary.LittleEndian.PutUint64(b[:], now)
		if !m.Memory().Write(api.DecodeU32(stack[2]), b[:]) {
			stack[0] = 21 // EFAULT
			return
		}
		stack[0] = 0
	}), []api.ValueType{i32, i64, i32}, []api.ValueType{i32}).Export("clock_time_get").
		NewFunctionBuilder().WithGoModuleFunction(badf, []api.ValueType{i32}, []api.ValueType{i32}).Export("fd_close").
		NewFunctionBuilder().WithGoModuleFunction(badf, []api.ValueType{i32, i64, i32, i32}, []api.ValueType{i32}).Export("fd_seek").
		NewFunctionBuilder().WithGoModuleFunction(badf, []api.ValueType{i32, i32, i32, i32}, []api.ValueType{i32}).Export("fd_write").
		Instantiate(ctx)
	if err != nil {
		return fmt.Errorf("transform: the engine's host functions: %w", err)
	}
	return nil
}

// result is what one call of the module gave.
type result struct {
	status uint32
	out    []byte // a copy, at most maxOut bytes
	cpu    time.Duration
}

// call runs the module's export fn on a fresh instance, pinned to one OS
// thread whose CPU time it counts. inputs are written into the instance's
// memory first (each NUL-terminated) and passed as pointer and length,
// then extra. maxOut bounds the out read back. An error is a *Error for a
// limit the call hit, or webhookd's own failure.
func (e *engine) call(ctx context.Context, fn string, inputs [][]byte, extra []uint64, maxOut int) (result, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	callCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	dog := watch(currentThread(e.clock), e.limits, cancel)
	res, err := e.callPinned(callCtx, fn, inputs, extra, maxOut)
	res.cpu = dog.stop()
	if err == nil {
		return res, nil
	}
	switch cause := context.Cause(callCtx); {
	case errors.Is(cause, errCPUTime):
		return res, &Error{Kind: KindTimeLimit, Message: fmt.Sprintf("the code ran longer than its %v of CPU time", e.limits.TimePerCall)}
	case errors.Is(cause, errWallTime):
		return res, &Error{Kind: KindTimeLimit, Message: fmt.Sprintf("the code ran longer than %v", e.limits.WallPerCall)}
	case ctx.Err() != nil:
		return res, fmt.Errorf("transform: %w", context.Cause(ctx))
	}
	if errors.Is(err, errNoRoom) || strings.HasPrefix(err.Error(), "wasm error: ") {
		// A trap in the engine is the script's doing (its memory or its
		// recursion at the bound): the instance is gone, webhookd is not.
		return res, &Error{Kind: KindMemoryLimit, Message: memoryMessage(e.limits) + ", or recursed too deep"}
	}
	return res, fmt.Errorf("transform: %s: %w", fn, err)
}

func (e *engine) callPinned(ctx context.Context, fn string, inputs [][]byte, extra []uint64, maxOut int) (result, error) {
	ctx = withLinearMemory(ctx)
	m, err := e.runtime.InstantiateModule(ctx, e.compiled, wazero.NewModuleConfig().WithName("").WithStartFunctions("_initialize"))
	if err != nil {
		return result{}, err
	}
	defer m.Close(context.WithoutCancel(ctx))
	params := make([]uint64, 0, 2*len(inputs)+len(extra))
	for _, in := range inputs {
		ptr, err := write(ctx, m, in)
		if err != nil {
			return result{}, err
		}
		params = append(params, uint64(ptr), uint64(len(in)))
	}
	params = append(params, extra...)
	ret, err := m.ExportedFunction(fn).Call(ctx, params...)
	if err != nil {
		return result{}, err
	}
	res := result{status: api.DecodeU32(ret[0])}
	outLen, err := m.ExportedFunction("wh_out_len").Call(ctx)
	if err != nil {
		return result{}, err
	}
	n := api.DecodeU32(outLen[0])
	if res.status == statusTooLarge {
		res.out = []byte(fmt.Sprint(n))
		return res, nil
	}
	if res.status == statusThrown {
		n = min(n, 2*4096+1) // engine/shim.c's MAX_TEXT, twice, and the NUL
	}
	if int(n) > maxOut {
		return result{}, fmt.Errorf("transform: the engine's output is %d bytes, more than %d", n, maxOut)
	}
	outPtr, err := m.ExportedFunction("wh_out_ptr").Call(ctx)
	if err != nil {
		return result{}, err
	}
	b, ok := m.Memory().Read(api.DecodeU32(outPtr[0]), n)
	if !ok {
		return result{}, errors.New("transform: the engine's output is out of its memory")
	}
	res.out = append([]byte(nil), b...)
	return res, nil
}

// write copies b, NUL-terminated, into memory the module allocates.
func write(ctx context.Context, m api.Module, b []byte) (uint32, error) {
	ret, err := m.ExportedFunction("wh_alloc").Call(ctx, uint64(len(b)+1))
	if err != nil {
		return 0, err
	}
	ptr := api.DecodeU32(ret[0])
	if ptr == 0 || !m.Memory().Write(ptr, append(b[:len(b):len(b)], 0)) {
		return 0, errNoRoom
	}
	return ptr, nil
}

// errNoRoom: the module's memory cannot hold an input.
var errNoRoom = errors.New("transform: the input does not fit the engine's memory")
