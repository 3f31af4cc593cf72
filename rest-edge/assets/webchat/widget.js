// Placeholder until the widget lands.
