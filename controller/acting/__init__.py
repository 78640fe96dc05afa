"""Acting on a pass: its actions written through the API (`executor`), in parallel where they are
independent, Events in the background; what was not done and what the API showed, handed back."""
