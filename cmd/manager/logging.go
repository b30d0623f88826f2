package main

import (
	"cmp"
	goflag "flag"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/go-logr/logr"
	"github.com/go-logr/zapr"
	"github.com/spf13/pflag"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlzap "sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// logFlags are the logging flags of every command: controller-runtime's zap flags, with
// --zap-log-level and its alias --log-level sharing one levelValue.
type logFlags struct {
	zap   ctrlzap.Options
	level levelValue
}

// levelNames are the named levels --log-level and --zap-log-level accept.
var levelNames = map[string]zapcore.Level{
	"debug": zapcore.DebugLevel,
	"info":  zapcore.InfoLevel,
	"warn":  zapcore.WarnLevel,
	"error": zapcore.ErrorLevel,
	"panic": zapcore.PanicLevel,
}

// levelValue is the value of --log-level and --zap-log-level; the later one given wins.
// text is empty until one is given.
type levelValue struct {
	text  string
	level zapcore.Level
}

// Set reads a named level or a verbosity 0-10 (logr's V(n) is zap's level -n).
func (v *levelValue) Set(s string) error {
	l, ok := levelNames[strings.ToLower(s)]
	if !ok {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 || n > 10 {
			return fmt.Errorf("want debug, info, warn, error, panic or a verbosity 0-10 (higher is more verbose)")
		}
		l = zapcore.Level(-n)
	}
	v.text, v.level = s, l
	return nil
}

func (v *levelValue) String() string {
	if v.text == "" {
		return "info"
	}
	return v.text
}

func (v *levelValue) Type() string { return "level" }

// register adds the logging flags to fs. Ours come first: AddGoFlagSet skips a name fs
// already has, so controller-runtime's --zap-log-level (which refuses warn) is replaced.
func (l *logFlags) register(fs *pflag.FlagSet) {
	fs.Var(&l.level, "log-level", "log level: debug, info, warn, error, or a verbosity 0-10 (higher is more verbose); short for --zap-log-level, and when both are given the later one wins")
	fs.Var(&l.level, "zap-log-level", "log level: debug, info, warn, error, panic, or a verbosity 0-10 (info, or debug with --zap-devel, when neither is given); the same as --log-level")
	gfs := goflag.NewFlagSet("zap", goflag.ContinueOnError)
	l.zap.BindFlags(gfs)
	fs.AddGoFlagSet(gfs)
	// The Go flags report no default; say what applies when they are not given.
	for name, def := range map[string]string{"zap-encoder": "json", "zap-stacktrace-level": "error", "zap-time-encoding": "epoch"} {
		if f := fs.Lookup(name); f != nil {
			f.DefValue = def
		}
	}
}

func (l *logFlags) options() ctrlzap.Options {
	o := l.zap
	if l.level.text != "" {
		o.Level = zap.NewAtomicLevelAt(l.level.level)
	}
	return o
}

// newZapLogger builds the zap logger the options describe, writing to w. Without flags:
// JSON lines, level info, epoch timestamps, the caller, stack traces from error up, and
// no sampling.
func newZapLogger(o ctrlzap.Options, w io.Writer) *zap.Logger {
	var level, stack zapcore.LevelEnabler = zapcore.InfoLevel, zapcore.ErrorLevel
	encoderConfig, newEncoder := zap.NewProductionEncoderConfig(), zapcore.NewJSONEncoder
	if o.Development {
		level, stack = zapcore.DebugLevel, zapcore.WarnLevel
		encoderConfig, newEncoder = zap.NewDevelopmentEncoderConfig(), zapcore.NewConsoleEncoder
	}
	level = cmp.Or(o.Level, level)
	stack = cmp.Or(o.StacktraceLevel, stack)
	timeEncoder := o.TimeEncoder
	if timeEncoder == nil {
		timeEncoder = zapcore.EpochTimeEncoder
	}
	setTime := func(c *zapcore.EncoderConfig) { c.EncodeTime = timeEncoder }
	var enc zapcore.Encoder
	if o.NewEncoder != nil {
		enc = o.NewEncoder(setTime)
	} else {
		setTime(&encoderConfig)
		enc = newEncoder(encoderConfig)
	}
	sink := zapcore.Lock(zapcore.AddSync(w))
	opts := []zap.Option{zap.AddCaller(), zap.AddStacktrace(stack), zap.ErrorOutput(sink)}
	if o.Development {
		opts = append(opts, zap.Development())
	}
	return zap.New(zapcore.NewCore(enc, sink, level), opts...)
}

// setupLogging builds the logger the flags describe on w, naming the replica, and makes it
// controller-runtime's and klog's, so client-go's lines come out in the same stream.
func setupLogging(l *logFlags, w io.Writer, replica string) logr.Logger {
	log := zapr.NewLogger(newZapLogger(l.options(), w)).WithValues("replica", replica)
	ctrl.SetLogger(log)
	klog.SetLogger(log)
	return log
}
