package main

import "github.com/scrubd/scrubd/agent/cli"

func init() {
	register("run", "run the agent: --sim (simulated NIC, no config) or --config FILE", cli.Run)
	register("plan", "software capacity vs line rate per frame size (placement model)", cli.Plan)
	register("rules", "list, get, add, delete or replace rules through the agent's API", cli.Rules)
	register("bench", "measure the software path (Direct Verbs engine on the NIC emulator): ns, cycles and Mpps per frame size", cli.Bench)
	register("config", "config check FILE: validate a config without touching anything", cli.Config)
}
