"""Independent DQN learners (phase=dqn): one actor process, one learner process per agent.

See docs/multiagent.md for the topology and its sync guarantees.
"""
