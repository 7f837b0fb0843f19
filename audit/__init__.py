"""ClaimTrail core: deciding, recording, replaying, explaining, serving."""
