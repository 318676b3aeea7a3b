"""The distill phase: PPO with a frozen privileged teacher (oracle guiding), one place."""
