import '@mantine/core/styles.css';
import '@mantine/notifications/styles.css';
import './app/console.css';
import {
  createTheme,
  DEFAULT_THEME,
  MantineProvider,
  type MantineColorsTuple,
  Modal,
  Notification,
} from '@mantine/core';
import { Notifications } from '@mantine/notifications';
import { setNonce } from 'get-nonce';
import { QueryClientProvider } from '@tanstack/react-query';
import { StrictMode } from 'react';
import { createRoot } from 'react-dom/client';
import { RouterProvider } from 'react-router';
import { queryClient } from './app/query';
import { router } from './app/router';

/** A palette whose two darkest shades are darker: Mantine's miss WCAG AA contrast (axe-core color-contrast). */
const darker = (name: string, filled: string, text: string): MantineColorsTuple =>
  [...DEFAULT_THEME.colors[name]!.slice(0, 8), filled, text] as unknown as MantineColorsTuple;

const theme = createTheme({
  // shade 8 fills buttons and badges (white text on it), shade 9 is the text of light variants (alerts, light badges)
  primaryShade: 8,
  // people who ask their system for less motion get dialogs, menus and toasts without their transitions
  respectReducedMotion: true,
  colors: {
    green: darker('green', '#237032', '#1c5f2a'),
    yellow: darker('yellow', '#a35900', '#8a4b00'),
  },
  components: {
    // the close buttons of dialogs and toasts are icons only: a name for screen readers (axe-core button-name)
    Modal: Modal.extend({ defaultProps: { closeButtonProps: { 'aria-label': 'Close' } } }),
    Notification: Notification.extend({ defaultProps: { closeButtonProps: { 'aria-label': 'Dismiss' } } }),
  },
});

const styleNonce = (): string => document.querySelector<HTMLMetaElement>('meta[name="csp-nonce"]')?.content ?? '';
// dialogs lock the page's scroll with a <style> element of their own (react-remove-scroll), which takes its nonce from here
setNonce(styleNonce());

createRoot(document.getElementById('root')!).render(
  <StrictMode>
    {/* the default theme's variables are in styles.css and the global classes in console.css; the
        <style> elements of responsive layouts carry the nonce the server gave this page */}
    <MantineProvider theme={theme} withGlobalClasses={false} defaultColorScheme="light" getStyleNonce={styleNonce}>
      {/* below the header: a toast must not cover the workspace picker or the person menu */}
      <Notifications position="bottom-right" />
      <QueryClientProvider client={queryClient}>
        <RouterProvider router={router} />
      </QueryClientProvider>
    </MantineProvider>
  </StrictMode>,
);
