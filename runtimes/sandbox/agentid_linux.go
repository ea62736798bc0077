package sandbox

// AgentID is the reserved inside uid and gid of the boundary's init and
// agent (host base+AgentID), shared with no command: the sandbox's cgroup
// is delegated to it, so a command, even one run as uid 0 inside, owns
// nothing in the cgroup tree. (The same constant as the agent identity
// switch uses; keep one when merging.)
const AgentID = 65535
