package httpfront

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter/internal/wire"
	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter/principal"
)

// ListenWriteTimeout bounds one write of a subscriptions/listen stream: a
// client that reads nothing for that long is gone, and its stream ends.
const ListenWriteTimeout = 30 * time.Second

// isListen reports whether q is a subscriptions/listen this front serves
// itself (2026-07-28, Tasks extension on): the SDK cannot carry its
// notifications (see package wire).
func (h *Handler) isListen(q *mcpRequest) bool {
	return q.era == wire.Modern && q.msg.IsCall() && q.msg.Method == wire.MethodListen && h.srv.ServesListen()
}

// serveListen answers a subscriptions/listen with an SSE stream: the
// acknowledgement first, then notifications/tasks as the watched tasks
// change, every message tagged with the subscription id. The stream holds
// no admission slot (it does no work while it waits); it ends when the
// client closes it, when a write stalls for ListenWriteTimeout, when the
// listener falls behind, or on shutdown, the last two with a
// notifications/cancelled that says why.
func (h *Handler) serveListen(w http.ResponseWriter, q *mcpRequest) {
	var who principal.Caller
	if q.p != nil {
		who = principal.Caller{Auth: h.auth, Name: q.p.Name}
	}
	l, fail := h.srv.Listen(q.r.Context(), q.msg.ID, who, q.msg.Params, q.msg.Meta)
	if fail != nil {
		wire.WriteError(w, fail)
		return
	}
	defer l.Close()
	rc := http.NewResponseController(w)
	// The request body was read whole: the read deadline no longer applies,
	// and the stream outlives the server's write timeout.
	_ = rc.SetReadDeadline(time.Time{})
	wire.StartSSE(w)
	write := func(n wire.Note) error {
		b, err := n.Encode()
		if err != nil {
			return err
		}
		_ = rc.SetWriteDeadline(time.Now().Add(h.opts.ListenWriteTimeout))
		if err := wire.WriteSSE(w, b); err != nil {
			return err
		}
		return rc.Flush()
	}
	ctx := q.r.Context()
	for {
		n, last, err := l.Next(ctx, h.listenStop.Done())
		if err != nil {
			if !errors.Is(err, context.Canceled) {
				h.log.Debug("subscriptions/listen stream ended", "err", err)
			}
			return
		}
		if err := write(n); err != nil {
			h.log.Info("subscriptions/listen stream ended: the client stopped reading", "err", err, "subscription", jsonrpcIDString(q.msg.ID))
			return
		}
		if last {
			return
		}
	}
}

func jsonrpcIDString(id jsonrpc.ID) string {
	b, _ := wire.EncodeMessage(&jsonrpc.Response{ID: id})
	return string(b)
}
