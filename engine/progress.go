package engine

import (
	"encoding/json"
	"strings"
)

// routerPortEnv makes llama-server a router's child
// (tools/server/server-models.cpp): it then writes its state to its
// standard output as routerStatePrefix and a JSON object.
const (
	// StageLoaded is the LoadProgress of a server that has loaded
	// everything and is about to listen.
	StageLoaded = "loaded"

	routerPortEnv     = "LLAMA_SERVER_ROUTER_PORT"
	routerStatePrefix = "cmd_child_to_router:state:"
	// routerExit is the router's word to a child to stop.
	routerExit = "cmd_router_to_child:exit"
)

// routerLine reads a line llama-server wrote to its router: ok says the
// line is one (it is no log line), and p is the load's progress where
// the line gives it ({"state":"loading","payload":{"current":STAGE,
// "value":FRACTION}}, or the ready state: StageLoaded), nil otherwise (a
// malformed payload, another state).
func routerLine(line string) (p *LoadProgress, ok bool) {
	body, ok := strings.CutPrefix(line, routerStatePrefix)
	if !ok {
		return nil, false
	}
	var msg struct {
		State   string `json:"state"`
		Payload struct {
			Current string   `json:"current"`
			Stage   string   `json:"stage"`
			Value   *float64 `json:"value"`
		} `json:"payload"`
	}
	switch err := json.Unmarshal([]byte(body), &msg); {
	case err != nil:
		return nil, true
	case msg.State == "ready":
		return &LoadProgress{Stage: StageLoaded, Value: 1}, true
	case msg.State != "loading":
		return nil, true
	}
	stage := msg.Payload.Current
	if stage == "" {
		stage = msg.Payload.Stage // the projector's stage names itself so
	}
	v := -1.0 // a stage without a figure
	if msg.Payload.Value != nil {
		v = min(max(*msg.Payload.Value, 0), 1)
	}
	return &LoadProgress{Stage: stage, Value: v}, true
}
