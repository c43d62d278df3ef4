/*
 * shim.c: webhookd's entry points into QuickJS, compiled with it to
 * WebAssembly (build.sh). The host, internal/transform, gives each call a
 * fresh instance of the module, so nothing a script does outlives the call;
 * the WebAssembly runtime bounds the memory (the instance's memory pages)
 * and the time (the call's context), whatever QuickJS itself does.
 *
 * The context has the language's intrinsics only: no std or os module, no
 * timers, no module loader, no host function. Its only ways out are the
 * values these functions return.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "quickjs.h"

#define EXPORT(name) __attribute__((export_name(name)))

/* What a call ended with; internal/transform/engine.go has the same list. */
enum {
    WH_OK = 0,         /* out: the bytecode (compile) or the returned JSON (run) */
    WH_THROWN = 1,     /* out: the exception's text, a NUL, its stack */
    WH_NO_HANDLER = 2, /* the code defines no function handler */
    WH_UNDEFINED = 3,  /* handler returned nothing JSON can hold */
    WH_TOO_LARGE = 4,  /* out_len: the size of the JSON handler returned */
    WH_NO_MEMORY = 5,  /* not even the error could be made */
};

/* The file name of the merchant's code in stacks; the host finds the line
 * and column of an error by it. */
static const char code_file[] = "handler.js";

/* The most of an exception's text, and of its stack, put in out. */
#define MAX_TEXT 4096

static const char *out;
static size_t out_len;

EXPORT("wh_alloc") void *wh_alloc(size_t n) { return malloc(n); }
EXPORT("wh_out_ptr") const char *wh_out_ptr(void) { return out; }
EXPORT("wh_out_len") size_t wh_out_len(void) { return out_len; }

static JSContext *new_context(size_t memory_limit, size_t stack_size)
{
    JSRuntime *rt = JS_NewRuntime();
    if (!rt)
        return NULL;
    JS_SetMemoryLimit(rt, memory_limit);
    JS_SetMaxStackSize(rt, stack_size);
    JS_SetCanBlock(rt, 0);
    return JS_NewContext(rt);
}

/* near_memory_limit tells whether the heap is within 64 KiB of its
 * bound, or the memory cannot give 64 KiB more: an exception of null is
 * then the engine's failure to make an "out of memory" error, not a
 * script's throw null. */
static int near_memory_limit(JSContext *ctx)
{
    void *p = malloc(64 << 10);
    if (!p)
        return 1;
    free(p);
    JSMemoryUsage usage;
    JS_ComputeMemoryUsage(JS_GetRuntime(ctx), &usage);
    return usage.malloc_limit > 0 && usage.malloc_size > usage.malloc_limit - (64 << 10);
}

/* thrown puts the pending exception's text, a NUL, and its stack in out.
 * Reading them
 * may run the script's own code (a toString, a getter): that runs under
 * the same bounds as the rest. */
static int thrown(JSContext *ctx)
{
    JSValue e = JS_GetException(ctx);
    if (JS_IsNull(e) && near_memory_limit(ctx))
        return WH_NO_MEMORY; /* QuickJS could not even make the error */
    const char *text = JS_ToCString(ctx, e);
    const char *stack = NULL;
    if (JS_IsObject(e)) {
        JSValue s = JS_GetPropertyStr(ctx, e, "stack");
        if (JS_IsString(s))
            stack = JS_ToCString(ctx, s);
        JS_FreeValue(ctx, s);
    }
    if (!text)
        return WH_NO_MEMORY;
    size_t n = strlen(text), m = stack ? strlen(stack) : 0;
    /* The host shows 1 KiB of the text: keep 4 KiB of it, cut between two
     * UTF-8 characters, so that a huge message does not hide the stack. */
    if (n > MAX_TEXT) {
        n = MAX_TEXT;
        while (n > 0 && (text[n] & 0xC0) == 0x80)
            n--;
    }
    if (m > MAX_TEXT)
        m = MAX_TEXT;
    char *buf = malloc(n + 1 + m + 1);
    if (!buf)
        return WH_NO_MEMORY;
    memcpy(buf, text, n);
    buf[n] = 0;
    if (m)
        memcpy(buf + n + 1, stack, m);
    buf[n + 1 + m] = 0;
    out = buf;
    out_len = n + 1 + m;
    return WH_THROWN;
}

/* define runs the compiled code (its top level) and returns the handler it
 * defines, or JS_UNDEFINED with *status set. */
static JSValue define(JSContext *ctx, JSValue fn, int *status)
{
    JSValue r = JS_EvalFunction(ctx, fn);
    if (JS_IsException(r)) {
        *status = thrown(ctx);
        return JS_UNDEFINED;
    }
    JS_FreeValue(ctx, r);
    /* An expression, so that a handler declared with const or let is found
     * as well as a function declaration. */
    JSValue h = JS_Eval(ctx, "typeof handler === 'function' ? handler : undefined",
                        51, "webhookd", JS_EVAL_TYPE_GLOBAL);
    if (JS_IsException(h)) {
        *status = thrown(ctx);
        return JS_UNDEFINED;
    }
    if (!JS_IsFunction(ctx, h)) {
        JS_FreeValue(ctx, h);
        *status = WH_NO_HANDLER;
        return JS_UNDEFINED;
    }
    return h;
}

/* wh_compile checks code (NUL-terminated, len bytes) and puts its bytecode
 * in out: it parses it, runs its top level and looks for the handler. */
EXPORT("wh_compile")
int wh_compile(const char *code, size_t len, size_t memory_limit, size_t stack_size)
{
    JSContext *ctx = new_context(memory_limit, stack_size);
    if (!ctx)
        return WH_NO_MEMORY;
    JSValue fn = JS_Eval(ctx, code, len, code_file,
                         JS_EVAL_TYPE_GLOBAL | JS_EVAL_FLAG_COMPILE_ONLY);
    if (JS_IsException(fn))
        return thrown(ctx);
    size_t n;
    uint8_t *bytecode = JS_WriteObject(ctx, &n, fn, JS_WRITE_OBJ_BYTECODE);
    if (!bytecode)
        return WH_NO_MEMORY;
    int status = WH_OK;
    JSValue h = define(ctx, fn, &status);
    if (status != WH_OK)
        return status;
    JS_FreeValue(ctx, h);
    out = (const char *)bytecode;
    out_len = n;
    return WH_OK;
}

/* wh_run runs bytecode made by wh_compile: handler gets the webhook parsed
 * from input (JSON, NUL-terminated, input_len bytes) and out is the JSON of
 * what it returns, at most max_out bytes. */
EXPORT("wh_run")
int wh_run(const uint8_t *bytecode, size_t bytecode_len, const char *input, size_t input_len,
           size_t max_out, size_t memory_limit, size_t stack_size)
{
    JSContext *ctx = new_context(memory_limit, stack_size);
    if (!ctx)
        return WH_NO_MEMORY;
    JSValue fn = JS_ReadObject(ctx, bytecode, bytecode_len, JS_READ_OBJ_BYTECODE);
    if (JS_IsException(fn))
        return thrown(ctx);
    int status = WH_OK;
    JSValue h = define(ctx, fn, &status);
    if (status != WH_OK)
        return status;
    JSValue webhook = JS_ParseJSON(ctx, input, input_len, "webhook");
    if (JS_IsException(webhook))
        return thrown(ctx);
    JSValue ret = JS_Call(ctx, h, JS_UNDEFINED, 1, &webhook);
    if (JS_IsException(ret))
        return thrown(ctx);
    /* The engine's own JSON.stringify, which the script cannot replace
     * (a toJSON of its own still runs, as its code). */
    JSValue json = JS_JSONStringify(ctx, ret, JS_UNDEFINED, JS_UNDEFINED);
    if (JS_IsException(json))
        return thrown(ctx);
    if (!JS_IsString(json))
        return WH_UNDEFINED;
    size_t n;
    const char *s = JS_ToCStringLen(ctx, &n, json);
    if (!s)
        return thrown(ctx);
    out_len = n;
    if (n > max_out)
        return WH_TOO_LARGE;
    out = s;
    return WH_OK;
}
